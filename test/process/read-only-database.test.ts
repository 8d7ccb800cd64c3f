import t from 'tap'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { createTestDatabase, jsonHeaders, testConfig, type Teardown, type TestDatabase } from '../helper.js'
import { withClient } from '../support/database.js'
import { request, type HttpAnswer } from '../support/http.js'
import { needsPostgres, proxiedDatabase, storedRows, timeUntil } from '../support/postgres.js'

// A database that refuses writes (a standby, a primary being demoted, a
// database set read-only) is unavailable, not broken: creates answer 503
// with Retry-After and store nothing, /health/ready says not ready within a
// probe's 1 s, and once the database accepts writes again the same app
// answers 200 with no restart. Everything over real HTTP.

const DB_TIMEOUT_MS = 1000
// A create waits for a writer at most DB_TIMEOUT_MS, its batch is sent
// again for up to DB_TIMEOUT_MS more, and the last send may need a new
// connection (DB_TIMEOUT_MS) and the driver's read timeout (DB_TIMEOUT_MS
// + 1 s). Plus slack for a busy machine.
const CREATE_BOUND_MS = 4 * DB_TIMEOUT_MS + 1000 + 2000
// Probes time out at 1 s; the service answers well inside it (its own
// bound is 0.8 s). Plus 1.5 s of slack for a loaded 2-core machine, as the
// other readiness bounds carry: still far below the 8 s DB_TIMEOUT_MS the
// hung case uses, so readiness waiting on the write deadline still fails.
const READY_BOUND_MS = 1000 + 1500

async function listening (t: Teardown, url: string, dbTimeoutMs: number): Promise<{ app: FastifyInstance, base: string }> {
  const app = await buildApp({ config: testConfig({ kind: 'postgres', url }, { dbTimeoutMs }) })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` }
}

async function timed (work: Promise<HttpAnswer>): Promise<HttpAnswer & { ms: number }> {
  const start = performance.now()
  const answer = await work
  return { ...answer, ms: performance.now() - start }
}

const create = async (base: string, id: number): Promise<HttpAnswer & { ms: number }> =>
  await timed(request(`${base}/plants`, { method: 'POST', headers: jsonHeaders(), body: JSON.stringify({ id, name: `p${id}`, tag: 'ro' }) }))

const ready = async (base: string): Promise<HttpAnswer & { ms: number }> => await timed(request(`${base}/health/ready`))

// The database's name, for ALTER DATABASE.
const dbName = (testDb: TestDatabase & { url: string }): string => new URL(testDb.url).pathname.slice(1)

async function admin (sql: string): Promise<void> {
  await withClient(process.env.TEST_DATABASE_URL as string, async (c) => { await c.query(sql) })
}

// The service's own connections to the database (application_name is set by
// the pool).
async function serviceBackends (name: string): Promise<number> {
  let count = 0
  await withClient(process.env.TEST_DATABASE_URL as string, async (c) => {
    const { rows } = await c.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'plant-store'", [name])
    count = rows[0]?.n ?? 0
  })
  return count
}

t.test('a read-only database: creates 503, not ready, then 200 again with no restart', { skip: needsPostgres }, async (t) => {
  const testDb = await createTestDatabase('postgres') as TestDatabase & { url: string }
  t.teardown(() => testDb.drop())
  const name = dbName(testDb)
  const { base } = await listening(t, testDb.url, DB_TIMEOUT_MS)

  let nextId = 1
  const warm = await Promise.all(Array.from({ length: 8 }, () => create(base, nextId++)))
  t.same(warm.map((a) => a.status), Array(8).fill(200), 'creates work while the database is writable')
  t.equal((await ready(base)).status, 200, 'ready while writable')

  // New sessions start read-only; the service's open ones are ended, as a
  // demoted primary ends them, so the pool must open read-only ones.
  await admin(`ALTER DATABASE ${name} SET default_transaction_read_only = on`)
  await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND application_name = 'plant-store'`)

  const refusedIds: number[] = []
  const refused: Array<HttpAnswer & { ms: number }> = []
  for (let i = 0; i < 3; i++) {
    refusedIds.push(nextId)
    refused.push(await create(base, nextId++))
  }
  const burstIds = Array.from({ length: 16 }, () => nextId++)
  refusedIds.push(...burstIds)
  refused.push(...await Promise.all(burstIds.map((id) => create(base, id))))
  // A create sent on a session that was ended under it cannot know whether
  // it committed (504), as after any lost connection; one sent to a session
  // that refuses writes knows nothing was stored (503). Which of the two the
  // first creates meet depends on when the pool notices the ended sessions.
  const unknown = refused.filter((a) => a.status === 504).length
  t.comment(`answers: ${refused.length - unknown} 503, ${unknown} 504`)
  t.same(refused.filter((a) => a.status !== 503 && a.status !== 504).map((a) => a.status), [], 'every create answers 503 (or 504 on an ended session), none 500')
  t.ok(refused.filter((a) => a.status === 503).length >= refused.length - 3, 'at most the first three creates (one per ended pooled session) answer 504; the rest 503')
  t.ok(refused.every((a) => a.headers['retry-after'] === '5'), 'each says when to retry')
  const slowest = Math.max(...refused.map((a) => a.ms))
  t.ok(slowest <= CREATE_BOUND_MS, `slowest 503 took ${Math.round(slowest)} ms (bound ${CREATE_BOUND_MS} ms)`)

  const notReady = await ready(base)
  t.equal(notReady.status, 503, 'not ready while the database refuses writes')
  t.equal(notReady.headers['retry-after'], '5', 'readiness says when to look again')
  t.ok(notReady.ms <= READY_BOUND_MS, `readiness answered in ${Math.round(notReady.ms)} ms`)

  const stored = await storedRows(testDb.url)
  t.same(refusedIds.filter((id) => stored.has(String(id))), [], 'nothing refused was stored (a read-only database stores nothing)')
  // Every connection that met a read-only session was thrown away: none is
  // left to be handed to the next create once the database is writable.
  // A dropped client's session ends a moment after the pool lets it go;
  // one kept would stay for the pool's 30 s idle timeout.
  const gone = await timeUntil(async () => await serviceBackends(name) === 0, 5000).then(() => true, () => false)
  t.ok(gone, 'no read-only connection kept in the pool')

  await admin(`ALTER DATABASE ${name} RESET default_transaction_read_only`)
  const again = await create(base, nextId++)
  t.equal(again.status, 200, 'the first create once writable answers 200')
  const burst = Array.from({ length: 16 }, () => nextId++)
  const answers = await Promise.all(burst.map((id) => create(base, id)))
  t.same(answers.map((a) => a.status), Array(16).fill(200), 'creates answer 200 again')
  t.equal((await ready(base)).status, 200, 'ready again')
  const after = await storedRows(testDb.url)
  t.same(burst.map((id) => after.get(String(id))), burst.map((id) => ({ id: String(id), name: `p${id}`, tag: 'ro' })), 'and are stored')
})

t.test('readiness answers within a probe\'s second when the database hangs', { skip: needsPostgres }, async (t) => {
  const { proxy, proxiedUrl } = await proxiedDatabase(t)
  // A long DB_TIMEOUT_MS, as a deployment riding out failovers sets it:
  // readiness must not take that long.
  const { base } = await listening(t, proxiedUrl, 8000)
  await timeUntil(async () => (await ready(base)).status === 200, 30_000)
  proxy.cut('blackhole')
  t.teardown(() => proxy.restore())
  for (let i = 0; i < 3; i++) {
    const answer = await ready(base)
    t.equal(answer.status, 503, 'not ready')
    t.ok(answer.ms <= READY_BOUND_MS, `answered in ${Math.round(answer.ms)} ms (bound ${READY_BOUND_MS} ms)`)
  }
})
