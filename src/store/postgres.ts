import pg from 'pg'
import type { BaseLogger } from 'pino'
import { commitOrRollBack, type Db, type QueryOptions, type Row, type Sql } from './db.js'
import { asStoreError, sentWriteError } from './store-errors.js'

// How long the readiness probe's commit may wait for its reply.
const PROBE_WAIT_MS = 60_000

export function openPostgres ({ url, timeoutMs, log }: { url: string, timeoutMs: number, log: Pick<BaseLogger, 'warn'> }): Db {
  const connection = connectionConfig(url, timeoutMs)
  const pool = new pg.Pool({ ...connection, max: 10 })
  // The readiness probe has a connection of its own, which a stalled commit keeps until the stall ends. Were it
  // given up sooner, each probe would leave another session waiting.
  const probePool = new pg.Pool({ ...connection, max: 1, query_timeout: PROBE_WAIT_MS })
  // An idle client whose server goes away emits here: unheard, it would crash the process.
  for (const p of [pool, probePool]) p.on('error', (err) => log.warn({ err }, 'idle database connection failed'))

  // pool.query closes a client whose statement failed, so a read-only session (25006) never serves the next create.
  return {
    kind: 'postgres',
    ...sqlOf(pool),
    // One slow statement does not stall every create; more would make smaller batches, dearer per row (bench/RESULTS.md).
    writers: 2,
    // On a client of its own, so failing to connect is a 503 (nothing sent).
    writeBefore: async <R extends Row = Row>(_deadline: number, text: string, params?: unknown[], options?: QueryOptions) =>
      await onClient(pool, async (client) => await run<R>(client, text, params, options).catch((err: unknown) => {
        throw sentWriteError(err)
      })),
    transaction: async (fn) => await onClient(pool, async (client) => {
      const tx = sqlOf(client)
      await tx.exec('BEGIN')
      return await commitOrRollBack(tx, async (commit) => await tx.exec(commit ? 'COMMIT' : 'ROLLBACK'), fn)
    }),
    probe: async (text) => { await sqlOf(probePool).exec(text) },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close () {
      // Idempotent: a test or a failed start-up may close before shutdown does.
      for (const p of [pool, probePool]) if (!p.ended && !p.ending) await p.end()
    }
  }
}

function connectionConfig (url: string, timeoutMs: number): pg.PoolConfig {
  return {
    connectionString: url,
    application_name: 'plant-store',
    // The server cancels a slow statement (57014, a true 503) but never a commit. The read timeout, a second
    // later, ends that wait (504).
    connectionTimeoutMillis: timeoutMs,
    statement_timeout: timeoutMs,
    query_timeout: timeoutMs + 1000,
    idleTimeoutMillis: 30_000,
    // Finds a dead server under an idle connection sooner than the OS's two hours.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000
  }
}

// Runs fn on a client of its own. A client whose statement failed may be broken, so it is destroyed rather than
// handed to the next request.
async function onClient<T> (pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect().catch(storeError)
  // A checked-out client has no listener of the pool's, so a connection that dies between two statements would
  // crash the process. With this listener, the next statement fails instead.
  let lost: unknown
  const onLost = (err: Error): void => { lost = err }
  client.on('error', onLost)
  try {
    return await fn(client)
  } catch (err) {
    lost ??= err
    throw err
  } finally {
    client.removeListener('error', onLost)
    client.release(lost instanceof Error ? lost : undefined)
  }
}

// Without a name, pg sends the statement as query(text, params) would.
async function run<R extends Row> (client: pg.Pool | pg.PoolClient, text: string, params?: unknown[], { name }: QueryOptions = {}) {
  return (await client.query<R>({ name, text, values: params })).rows
}

const storeError = (err: unknown): never => {
  throw asStoreError(err)
}

// Runs statements on the pool or on a client, and turns their failures into store errors.
function sqlOf (client: pg.Pool | pg.PoolClient): Sql {
  return {
    query: async <R extends Row = Row>(text: string, params?: unknown[], options?: QueryOptions) =>
      await run<R>(client, text, params, options).catch(storeError),
    exec: async (text: string) => { await client.query(text).catch(storeError) }
  }
}
