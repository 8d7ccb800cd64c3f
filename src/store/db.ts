// The small SQL surface both backends offer. The plant store and the
// migrations speak only to this, so PostgreSQL (pg) and embedded PGlite run
// the same SQL.
export type Row = Record<string, unknown>

export interface QueryOptions {
  // PostgreSQL: parse and plan the statement once per connection under this
  // name and reuse it. Only for a fixed text that runs often: a name must
  // always go with the same text. PGlite ignores it.
  name?: string
}

export interface Sql {
  // One statement with $1… parameters.
  query<R extends Row = Row>(text: string, params?: unknown[], options?: QueryOptions): Promise<R[]>
  // A script of several statements, no parameters (migrations).
  exec(text: string): Promise<void>
}

export interface Db extends Sql {
  readonly kind: 'postgres' | 'pglite'
  // Batches the plant store keeps in flight at once: what this backend
  // runs side by side to good effect.
  readonly writers: number
  // One statement that writes, whose effect must not be committed once
  // `deadline` (performance.now()) has passed: each backend bounds a write
  // already sent in its own way, and a write is never raced against a timer
  // (its caller must be told what the database did).
  writeBefore<R extends Row = Row>(deadline: number, text: string, params?: unknown[], options?: QueryOptions): Promise<R[]>
  // Runs fn on one connection inside BEGIN … COMMIT (ROLLBACK when it throws).
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>
  close(): Promise<void>
  // PostgreSQL: the pool's connections now (for metrics). PGlite has no pool.
  poolStats?(): PoolStats
}

// What a backend's connection offers before the plant store's write rules
// are added to it (pglite.ts adds them to the embedded thread's).
export type Connection = Omit<Db, 'writers' | 'writeBefore'>

export interface PoolStats {
  // Connections open, idle among them, and callers waiting for one.
  total: number
  idle: number
  waiting: number
}

// pg returns int8 as a string, PGlite as a number or a bigint: every id read
// back from the database goes through here.
export function toId (value: unknown): bigint {
  if (typeof value === 'bigint') return value
  if (typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value))) return BigInt(value)
  throw new TypeError(`not an int8 value: ${typeof value}`)
}
