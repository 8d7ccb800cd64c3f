// What both backends offer, so PostgreSQL (pg) and PGlite run the same SQL.
export type Row = Record<string, unknown>

// name: PostgreSQL plans the statement once per connection under it, always with the same text. PGlite ignores it.
export interface QueryOptions { name?: string }

export interface Sql {
  query<R extends Row = Row>(text: string, params?: unknown[], options?: QueryOptions): Promise<R[]>
  exec(text: string): Promise<void> // a script of several statements, no parameters (migrations)
}

export interface Db extends Sql {
  readonly kind: 'postgres' | 'pglite'
  readonly writers: number // batches the plant store keeps in flight at once
  // Not committed past `deadline` (performance.now()); never raced against a timer: its caller is told what happened.
  writeBefore<R extends Row = Row>(deadline: number, text: string, params?: unknown[], options?: QueryOptions): Promise<R[]>
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>
  probe?(text: string): Promise<void> // the readiness probe's statement; PostgreSQL's on a connection of its own
  close(): Promise<void>
  poolStats?(): PoolStats // PostgreSQL's pool, for the metrics
  freeBytes?(): Promise<number> // PGlite on disk: free for the data directory (PostgreSQL's disk is its operator's)
}

export interface PoolStats { total: number, idle: number, waiting: number }

// fn between BEGIN (sent by the caller) and COMMIT; ROLLBACK, its own failure ignored, when fn throws.
export async function commitOrRollBack<T> (tx: Sql, end: (commit: boolean) => Promise<unknown>, fn: (tx: Sql) => Promise<T>): Promise<T> {
  const result = await fn(tx).catch(async (err: unknown) => {
    await end(false).catch(() => {})
    throw err
  })
  await end(true)
  return result
}
