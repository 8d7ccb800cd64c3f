// What both backends offer, so PostgreSQL (pg) and PGlite run the same SQL.
export type Row = Record<string, unknown>

// With a name, PostgreSQL plans the statement once per connection and keeps the plan under that name, so the name
// always goes with the same text. PGlite ignores it.
export interface QueryOptions { name?: string }

export interface Sql {
  query<R extends Row = Row>(text: string, params?: unknown[], options?: QueryOptions): Promise<R[]>
  exec(text: string): Promise<void> // a script of several statements, no parameters (migrations)
}

export interface Db extends Sql {
  readonly kind: 'postgres' | 'pglite'
  readonly writers: number // batches the plant store keeps in flight at once
  // Writes so that nothing commits past `deadline` (a performance.now() time). It is never raced against a timer,
  // so its caller learns what the database did.
  writeBefore<R extends Row = Row>(deadline: number, text: string, params?: unknown[], options?: QueryOptions): Promise<R[]>
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>
  probe?(text: string): Promise<void> // the readiness probe's statement; PostgreSQL's on a connection of its own
  close(): Promise<void>
  poolStats?(): PoolStats // PostgreSQL's pool, for the metrics
  freeBytes?(): Promise<number> // PGlite on disk: free for the data directory (PostgreSQL's disk is its operator's)
}

export interface PoolStats { total: number, idle: number, waiting: number }

// Runs fn between BEGIN (which the caller has sent) and COMMIT. When fn throws, it sends ROLLBACK and ignores that
// statement's own failure.
export async function commitOrRollBack<T> (tx: Sql, end: (commit: boolean) => Promise<unknown>, fn: (tx: Sql) => Promise<T>): Promise<T> {
  const result = await fn(tx).catch(async (err: unknown) => {
    await end(false).catch(() => {})
    throw err
  })
  await end(true)
  return result
}
