import pg from 'pg'
import type { FastifyBaseLogger } from 'fastify'
import type { Db, QueryOptions, Row, Sql } from './db.js'
import { asStoreError } from './unavailable.js'

export interface PostgresOptions {
  url: string
  timeoutMs: number
  log: FastifyBaseLogger
  poolSize?: number
}

export function openPostgres ({ url, timeoutMs, log, poolSize = 10 }: PostgresOptions): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    application_name: 'plant-store',
    // Every wait is bounded: checkout/connect, the server-side statement and
    // the client-side read (a cut network never answers at all). A create's
    // answer is its INSERT's outcome, so the server must end a slow one:
    // it cancels past statement_timeout (57014) and nothing is stored, a
    // true 503. The read timeout starts when the statement is sent, so it
    // fires first only when the cancel takes over a second to come back;
    // then, as when the connection drops mid-statement, the outcome is
    // unknown and the create is answered 503 though it may have committed
    // (a retry answers 200). A longer read timeout would narrow that window
    // little and hold every create on a cut network longer.
    connectionTimeoutMillis: timeoutMs,
    statement_timeout: timeoutMs,
    query_timeout: timeoutMs + 1000,
    idleTimeoutMillis: 30_000,
    // TCP keepalive probes find a dead server under an idle connection;
    // the OS default would wait two hours before the first probe.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000
  })
  // An idle client whose server goes away emits here; without a listener the
  // process would crash. The pool drops that client and opens a new one later.
  pool.on('error', (err) => log.warn({ err }, 'idle database connection failed'))

  // pool.query releases its client with the error when a statement fails,
  // and the pool then closes that client rather than keep it: a session on a
  // demoted primary or a read-only database (25006) is never handed to the
  // next create. test/process/read-only-database.test.ts holds it to that.
  const poolSql = sqlOf(pool)
  return {
    kind: 'postgres',
    ...poolSql,
    // One slow statement (say, waiting on a row lock another instance
    // holds) does not stall every create; more writers make smaller
    // batches and cost the server more per row (bench/RESULTS.md).
    writers: 2,
    // The server ends a statement past statement_timeout (57014, nothing
    // stored: a true 503); one that commits is answered by what it did,
    // however late.
    writeBefore: async <R extends Row = Row>(_deadline: number, text: string, params?: unknown[], options?: QueryOptions) =>
      await poolSql.query<R>(text, params, options),
    transaction: async (fn) => await inTransaction(pool, fn),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close () {
      // Idempotent: a test or a failed start-up may close before shutdown does.
      if (!pool.ended && !pool.ending) await pool.end()
    }
  }
}

// Runs fn on one client of the pool inside BEGIN … COMMIT (ROLLBACK when it
// throws).
async function inTransaction<T> (pool: pg.Pool, fn: (tx: Sql) => Promise<T>): Promise<T> {
  let client: pg.PoolClient
  try {
    client = await pool.connect()
  } catch (err) {
    throw asStoreError(err)
  }
  // A checked-out client has no listener of the pool's: a connection
  // that dies between two statements (postgrator reads files between
  // them) would emit an unhandled 'error' and crash the process. The
  // next statement fails on its own; this only keeps the error handled.
  let lost: Error | undefined
  const onLost = (err: Error): void => { lost = err }
  client.on('error', onLost)
  const tx = sqlOf(client)
  let failure: unknown
  try {
    await tx.exec('BEGIN')
    const result = await fn(tx)
    await tx.exec('COMMIT')
    return result
  } catch (err) {
    failure = err
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    // A client that failed mid-transaction may be broken: destroy it
    // rather than hand it to the next request.
    client.removeListener('error', onLost)
    client.release(lost ?? (failure instanceof Error ? failure : undefined))
  }
}

// Statements on the pool, or on one checked-out client in a transaction,
// their failures as store errors.
function sqlOf (client: pg.Pool | pg.PoolClient): Sql {
  return {
    async query<R extends Row = Row>(text: string, params?: unknown[], options?: QueryOptions) {
      try {
        const result = options?.name === undefined
          ? await client.query<R>(text, params)
          : await client.query<R>({ name: options.name, text, values: params ?? [] })
        return result.rows
      } catch (err) {
        throw asStoreError(err)
      }
    },
    async exec (text: string) {
      try {
        await client.query(text)
      } catch (err) {
        throw asStoreError(err)
      }
    }
  }
}
