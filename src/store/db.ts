// What both backends offer, so PostgreSQL (pg) and PGlite run the same SQL.
export type Row = Record<string, unknown>

export interface QueryOptions {
  // PostgreSQL: planned once per connection under this name, so a name must
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
  // Batches the plant store keeps in flight at once.
  readonly writers: number
  // A statement that writes, not committed past `deadline` (performance.now()).
  // Never raced against a timer: its caller must be told what the database did.
  writeBefore<R extends Row = Row>(deadline: number, text: string, params?: unknown[], options?: QueryOptions): Promise<R[]>
  // fn on one connection, in commitOrRollBack.
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>
  // The readiness probe's statement; PostgreSQL runs it on a connection of its own.
  probe?(text: string): Promise<void>
  close(): Promise<void>
  poolStats?(): PoolStats // PostgreSQL's pool, for the metrics
  // PGlite on disk: bytes free for the data directory (PostgreSQL's disk is its operator's).
  freeBytes?(): Promise<number>
}

// The embedded thread's connection, before pglite.ts adds the write rules.
export type Connection = Omit<Db, 'writers' | 'writeBefore' | 'freeBytes' | 'probe'>

// Connections open, idle among them, and callers waiting for one.
export interface PoolStats { total: number, idle: number, waiting: number }

// fn between BEGIN (sent by the caller) and COMMIT; ROLLBACK, its own
// failure ignored, when fn throws.
export async function commitOrRollBack<T> (tx: Sql, end: (commit: boolean) => Promise<unknown>, fn: (tx: Sql) => Promise<T>): Promise<T> {
  let result: T
  try {
    result = await fn(tx)
  } catch (err) {
    await end(false).catch(() => {})
    throw err
  }
  await end(true)
  return result
}
