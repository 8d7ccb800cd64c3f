import t from 'tap'
import http from 'node:http'
import { Writable } from 'node:stream'
import { forEachBackend, createTestDatabase, testConfig, jsonHeaders, auth, type Teardown } from '../helper.js'
import { buildApp } from '../../app.js'
import { request } from '../support/http.js'
import { metricsUrlOf, parseSamples, valueOf, type Sample } from '../support/prometheus.js'
import type { Config } from '../../src/config.js'

// Metrics over real sockets: the service listens on a port of its own and
// serves /metrics on METRICS_PORT (0 here: any free port).

interface Running { apiUrl: string, metricsUrl: string, logs: string[], close(): Promise<void> }

async function startWithMetrics (t: Teardown, backend: 'pglite' | 'postgres', overrides: Partial<Config> = {}, writer?: { maxQueue: number }): Promise<Running> {
  const logs: string[] = []
  const stream = new Writable({ write (chunk, _encoding, done) { logs.push(String(chunk)); done() } })
  const testDb = await createTestDatabase(backend)
  t.teardown(() => testDb.drop())
  const app = await buildApp({
    config: testConfig(testDb.database, { metricsPort: 0, ...overrides }),
    logger: { level: 'info', stream },
    ...(writer === undefined ? {} : { writer })
  })
  t.teardown(() => app.close())
  const apiUrl = await app.listen({ port: 0, host: '127.0.0.1' })
  return { apiUrl, metricsUrl: metricsUrlOf(logs), logs, close: async () => { await app.close() } }
}

async function scrape (url: string): Promise<Sample[]> {
  const res = await request(url)
  if (res.status !== 200) throw new Error(`GET ${url} answered ${res.status}`)
  return parseSamples(res.body)
}

const post = async (apiUrl: string, body: unknown, headers: Record<string, string> = jsonHeaders()) =>
  await request(`${apiUrl}/plants`, { method: 'POST', headers, body: JSON.stringify(body) })

const duration = (samples: Sample[], status: number, route = '/plants', method = 'POST'): number =>
  valueOf(samples, 'http_request_duration_seconds_count', { method, route, status_code: String(status) })

forEachBackend(t, 'a known mix of creates moves the counters by exactly its numbers', async (t, backend) => {
  const running = await startWithMetrics(t, backend)
  // Something before the baseline, so the series exist and deltas are real.
  t.equal((await post(running.apiUrl, { id: 1000, name: 'warm-up' })).status, 200)
  const before = await scrape(running.metricsUrl)

  const answers: number[] = []
  for (const id of [1, 2, 3]) answers.push((await post(running.apiUrl, { id, name: 'Fern' })).status) // new
  for (const id of [1, 2]) answers.push((await post(running.apiUrl, { id, name: 'Fern' })).status) // replay
  answers.push((await post(running.apiUrl, { id: 3, name: 'Cactus' })).status) // conflict
  answers.push((await post(running.apiUrl, { id: 4, name: 'Fern' }, { 'content-type': 'application/json' })).status) // 401: no token
  answers.push((await post(running.apiUrl, { id: 4, name: 'Fern' }, { ...jsonHeaders(), authorization: 'Bearer wrong' })).status) // 401
  answers.push((await request(`${running.apiUrl}/plants`, { method: 'POST', headers: { ...auth(), 'content-type': 'text/plain' }, body: 'x' })).status) // 415
  t.same(answers, [200, 200, 200, 200, 200, 409, 401, 401, 415], 'the answers the mix should get')

  const after = await scrape(running.metricsUrl)
  const delta = (name: string, labels: Record<string, string> = {}): number => valueOf(after, name, labels) - valueOf(before, name, labels)
  t.equal(delta('plant_store_creates_total', { outcome: 'created' }), 3, 'created +3')
  t.equal(delta('plant_store_creates_total', { outcome: 'replayed' }), 2, 'replayed +2')
  t.equal(delta('plant_store_creates_total', { outcome: 'conflict' }), 1, 'conflict +1')
  t.equal(duration(after, 200) - duration(before, 200), 5, 'five 200s timed')
  t.equal(duration(after, 409) - duration(before, 409), 1, 'one 409 timed')
  t.equal(duration(after, 401) - duration(before, 401), 2, 'two 401s timed')
  t.equal(duration(after, 415) - duration(before, 415), 1, 'one 415 timed')
  t.equal(delta('plant_store_write_batch_size_sum'), 6, 'the six creates that reached the store were written in batches')
  t.ok(delta('plant_store_write_batch_size_count') >= 1 && delta('plant_store_write_batch_size_count') <= 6, 'one to six batches')
  t.equal(delta('plant_store_creates_rejected_queue_full_total'), 0, 'nothing refused for a full queue')
  t.equal(valueOf(after, 'plant_store_write_queue_depth'), 0, 'nothing waiting now')
  t.equal(valueOf(after, 'plant_store_writes_in_flight'), 0, 'nothing in flight now')
  if (backend === 'postgres') {
    t.ok(valueOf(after, 'plant_store_db_pool_connections') >= 1, 'the pool has a connection open')
    t.ok(after.some((s) => s.name === 'plant_store_db_pool_idle_connections'), 'idle connections')
    t.equal(valueOf(after, 'plant_store_db_pool_waiting_clients'), 0, 'nobody waits for a connection')
  } else {
    t.notOk(after.some((s) => s.name.startsWith('plant_store_db_pool_')), 'PGlite has no pool')
  }
  for (const name of ['nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes', 'process_cpu_seconds_total']) {
    t.ok(after.some((s) => s.name === name), `default metric ${name}`)
  }
})

t.test('the API port has no /metrics; the listener answers only GET /metrics', async (t) => {
  const running = await startWithMetrics(t, 'pglite')
  const onApi = await request(`${running.apiUrl}/metrics`)
  t.equal(onApi.status, 404, 'GET /metrics on the API port is an unknown route')
  t.same(JSON.parse(onApi.body).error, 404)
  const res = await request(running.metricsUrl)
  t.equal(res.status, 200)
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/, 'Prometheus text format')
  t.match(res.body, '# TYPE nodejs_gc_duration_seconds histogram', 'GC durations')
  t.equal(new URL(running.metricsUrl).hostname, '127.0.0.1', 'on HOST')
  t.not(new URL(running.metricsUrl).port, new URL(running.apiUrl).port, 'a port of its own')
  const elsewhere = await request(new URL('/other', running.metricsUrl).href)
  t.equal(elsewhere.status, 404)
  t.same(Object.keys(JSON.parse(elsewhere.body)).sort(), ['error', 'message'], 'Error shape')
  const wrongMethod = await request(running.metricsUrl, { method: 'POST' })
  t.equal(wrongMethod.status, 405)
  t.equal(wrongMethod.headers.allow, 'GET, HEAD')
})

t.test('a thousand distinct unknown URLs add no label values', async (t) => {
  const running = await startWithMetrics(t, 'pglite')
  const seriesBefore = (await scrape(running.metricsUrl)).filter((s) => s.name === 'http_request_duration_seconds_count')
  // Ten keep-alive connections, as a scanner sends them: a connection per request took 30 s on a loaded machine.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 10 })
  t.teardown(() => agent.destroy())
  const statuses = await Promise.all(Array.from({ length: 1000 }, async (_, i) =>
    (await request(`${running.apiUrl}/scan/${i}/wp-login.php?x=${i}`, { agent })).status))
  t.same(statuses.filter((status) => status !== 404), [], 'every unknown URL answered 404')
  const after = await scrape(running.metricsUrl)
  const series = after.filter((s) => s.name === 'http_request_duration_seconds_count')
  t.equal(series.length, seriesBefore.length + 1, 'one new series for all of them')
  t.equal(duration(after, 404, 'unmatched', 'GET'), 1000, 'all counted under route="unmatched"')
  t.notOk(after.some((s) => (s.labels.route ?? '').includes('scan')), 'no raw URL in any label')
})

t.test('a create refused for a full queue is counted; the listener closes with the app', async (t) => {
  // A queue bound of 0: every create finds the queue full.
  const running = await startWithMetrics(t, 'pglite', {}, { maxQueue: 0 })
  t.equal(valueOf(await scrape(running.metricsUrl), 'plant_store_creates_rejected_queue_full_total'), 0, 'starts at 0')
  t.equal((await post(running.apiUrl, { id: 1, name: 'Fern' })).status, 503)
  t.equal((await post(running.apiUrl, { id: 2, name: 'Fern' })).status, 503)
  const after = await scrape(running.metricsUrl)
  t.equal(valueOf(after, 'plant_store_creates_rejected_queue_full_total'), 2, 'both refusals counted')
  t.equal(duration(after, 503), 2, 'and timed as 503s')
  await running.close()
  await t.rejects(request(running.metricsUrl, { timeoutMs: 2000 }), 'nothing listens on the metrics port after close')
})

t.test('a metrics port that is taken stops start-up', async (t) => {
  const running = await startWithMetrics(t, 'pglite')
  const taken = Number(new URL(running.metricsUrl).port)
  await t.rejects(startWithMetrics(t, 'pglite', { metricsPort: taken }), { message: `METRICS_PORT: ${taken} is already in use on 127.0.0.1 (EADDRINUSE)` })
})

// The gauge the alert on a replica not ready reads (deploy/prometheus/):
// what /health/ready answers, asked at the scrape.
forEachBackend(t, 'plant_store_ready follows readiness: 1, then 0 once the database is gone', async (t, backend) => {
  const testDb = await createTestDatabase(backend)
  t.teardown(() => testDb.drop())
  const logs: string[] = []
  const stream = new Writable({ write (chunk, _encoding, done) { logs.push(String(chunk)); done() } })
  const app = await buildApp({ config: testConfig(testDb.database, { metricsPort: 0 }), logger: { level: 'info', stream } })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const ready = async (): Promise<number> => valueOf(await scrape(metricsUrlOf(logs)), 'plant_store_ready', {})
  t.equal(await ready(), 1, 'ready: 1')
  await app.db.close()
  t.equal(await ready(), 0, 'the database closed: 0')
})
