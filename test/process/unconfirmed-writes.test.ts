import t, { type Test } from 'tap'
import { jsonHeaders } from '../helper.js'
import { request, type HttpAnswer } from '../support/http.js'
import { storedRows, sleep } from '../support/postgres.js'
import { startServerProcess, type SourceServer } from '../support/processes.js'
import { metricsUrlOf, parseSamples, valueOf } from '../support/prometheus.js'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js'
import { needsThrowawayCluster, startThrowawayCluster, type ThrowawayCluster } from '../support/throwaway-cluster.js'

// A create whose write was sent and not confirmed before the deadline may
// still commit: it answers 504 (outcome unknown), never 503, which says
// nothing was stored. Three ways a write goes unconfirmed, each for a few
// seconds while 16 clients create without pause, on a PostgreSQL cluster of
// the test's own behind a relay: a synchronous standby that does not exist
// (the commit waits), the server frozen (SIGSTOP), the server's replies
// held by the relay. Every 503 must be unstored, every 200 stored; and
// /health/ready, which commits a probe transaction, says not ready within
// a second during the stall and ready after it. Each 504 is counted
// (plant_store_creates_total{outcome="unknown"}) and logged at warn with its
// request id.

const DB_TIMEOUT_MS = 1500
const STALL_MS = 4000
const CLIENTS = 16
// A stalled create ends by the driver's read timeout (DB_TIMEOUT_MS + 1 s)
// after waiting for a writer up to DB_TIMEOUT_MS: the clients go on until
// every create sent during the stall has its answer.
const AFTER_STALL_MS = 2 * DB_TIMEOUT_MS + 2000
// Probes during the stall: 503 within 1 s, plus slack for a loaded 2-core
// machine (still well inside the 4 s stall a probe without a bound would wait out).
const READY_BOUND_MS = 1000 + 1500
// The probe's first moments and last: a probe that began before the stall
// may still commit, and the database needs a moment to notice the change.
const STALL_EDGE_MS = 300

// The server's sessions running the readiness probe's statement.
const PROBE_SESSIONS_SQL = 'SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE \'%pg_logical_emit_message%\' AND pid <> pg_backend_pid()'

interface Answered { id: number, status: number }
interface Probe { startedAt: number, ms: number, status: number }

interface Stall {
  name: string
  // The server answers other sessions meanwhile.
  serverAnswers: boolean
  start: () => Promise<void> | void
  stop: () => Promise<void> | void
}

async function createLoop (base: string, nextId: () => number, until: () => boolean, answers: Answered[]): Promise<void> {
  while (!until()) {
    const id = nextId()
    const res = await request(`${base}/plants`, { method: 'POST', headers: jsonHeaders(), body: JSON.stringify({ id, name: `p${id}` }), timeoutMs: 20_000 })
      .catch(() => ({ status: 0 }) as HttpAnswer)
    answers.push({ id, status: res.status })
    // A bounded load: a stalled create waits anyway.
    await sleep(20)
  }
}

async function probeLoop (base: string, until: () => boolean, probes: Probe[]): Promise<void> {
  while (!until()) {
    const startedAt = performance.now()
    const res = await request(`${base}/health/ready`, { timeoutMs: 5000 }).catch(() => ({ status: 0 }) as HttpAnswer)
    probes.push({ startedAt, ms: performance.now() - startedAt, status: res.status })
    await sleep(150)
  }
}

async function unknownCount (server: SourceServer): Promise<number> {
  const metricsUrl = metricsUrlOf(server.logs.map((l) => JSON.stringify(l)))
  return valueOf(parseSamples((await request(metricsUrl)).body), 'plant_store_creates_total', { outcome: 'unknown' })
}

// Returns how many creates were answered 504.
async function runStall (t: Test, server: SourceServer, cluster: ThrowawayCluster, stall: Stall, firstId: number): Promise<number> {
  let id = firstId
  const answers: Answered[] = []
  const probes: Probe[] = []
  let stallStart = Infinity
  let stallEnd = Infinity
  let done = false
  const clients = Array.from({ length: CLIENTS }, async () => await createLoop(server.url, () => id++, () => done, answers))
  const prober = probeLoop(server.url, () => done, probes)
  await sleep(500)
  await stall.start()
  stallStart = performance.now()
  await sleep(STALL_MS)
  const probeSessions = stall.serverAnswers
    ? Number((await cluster.admin(PROBE_SESSIONS_SQL))[0]?.n)
    : 0
  // The stall may end as soon as stop() begins: a probe waiting in its
  // commit then answers 200 at once.
  stallEnd = performance.now()
  await stall.stop()
  await sleep(AFTER_STALL_MS)
  done = true
  await Promise.all([...clients, prober])
  // Commits that were still waiting land now.
  await sleep(1000)
  const rows = await storedRows(cluster.url)
  const stored = (a: Answered): boolean => rows.has(String(a.id))
  const by = (status: number): Answered[] => answers.filter((a) => a.status === status)
  const others = answers.filter((a) => ![200, 503, 504].includes(a.status))
  const during = probes.filter((p) => p.startedAt > stallStart + STALL_EDGE_MS && p.startedAt + p.ms < stallEnd)
  const after = probes.filter((p) => p.startedAt > stallEnd + AFTER_STALL_MS / 2)
  t.comment(`figures: stall=${stall.name} creates=${answers.length} ok=${by(200).length} ` +
    `503=${by(503).length} 503stored=${by(503).filter(stored).length} 504=${by(504).length} 504stored=${by(504).filter(stored).length} ` +
    `other=${others.length} readyDuring=${during.map((p) => `${p.status}/${Math.round(p.ms)}ms`).join(',')} readyAfter=${after.map((p) => p.status).join(',')}`)
  t.same(by(503).filter(stored), [], 'no create answered 503 is stored')
  t.same(by(200).filter((a) => !stored(a)), [], 'every create answered 200 is stored')
  t.same(others, [], 'every create answered 200, 503 or 504')
  t.ok(by(503).length + by(504).length > 0, 'the stall was felt by creates')
  t.ok(during.length > 0, 'readiness was probed during the stall')
  t.same(during.filter((p) => p.status !== 503 || p.ms > READY_BOUND_MS), [], `/health/ready answers 503 within ${READY_BOUND_MS} ms during the stall`)
  t.ok(after.length > 0 && after.every((p) => p.status === 200), '/health/ready answers 200 after the stall')
  t.ok(probeSessions <= 1, `at most one readiness probe session on the server at the end of the stall (${probeSessions})`)
  return by(504).length
}

t.test('writes sent and not confirmed answer 504, never 503; readiness commits', { skip: needsThrowawayCluster }, async (t) => {
  const cluster = await startThrowawayCluster(t)
  const target = new URL(cluster.url)
  const proxy: TcpProxy = await startTcpProxy({ port: Number(target.port) })
  t.teardown(() => proxy.close())
  const server = await startServerProcess({ databaseUrl: proxy.via(cluster.url), env: { DB_TIMEOUT_MS: String(DB_TIMEOUT_MS), METRICS_PORT: '0' } })
  t.teardown(() => server.stop())
  await sleep(1000)

  const stalls: Stall[] = [
    { name: 'missing-sync-standby', serverAnswers: true, start: async () => await cluster.requireMissingStandby(true), stop: async () => await cluster.requireMissingStandby(false) },
    { name: 'sigstop', serverAnswers: false, start: () => cluster.freeze(true), stop: () => cluster.freeze(false) },
    { name: 'held-replies', serverAnswers: true, start: () => proxy.holdReplies(true), stop: () => proxy.holdReplies(false) }
  ]
  let firstId = 1
  let unknown = 0
  for (const stall of stalls) {
    await t.test(stall.name, async (t) => { unknown += await runStall(t, server, cluster, stall, firstId) })
    firstId += 1_000_000
  }
  t.ok(unknown > 0, `${unknown} creates answered 504`)
  t.equal(await unknownCount(server), unknown, 'each 504 counted as outcome="unknown"')
  const warned = server.logs.filter((l) => l.msg === 'outcome unknown' && l.level === 40 && typeof l.reqId === 'string')
  t.equal(warned.length, unknown, 'each 504 logged at warn with its request id')
})
