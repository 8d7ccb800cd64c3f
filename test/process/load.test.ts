import t from 'tap'
import http from 'node:http'
import { TOKEN } from '../helper.js'
import { needsPostgres, proxiedDatabase, storedRows, timeUntil } from '../support/postgres.js'
import { startServerProcess } from '../support/processes.js'
import { request } from '../support/http.js'

// A few thousand creates over keep-alive connections while every packet to
// the database is delayed: nothing acknowledged may be missing, nothing
// stored may be unacknowledged, and the process must not balloon.
const CREATES = 3000
const CONNECTIONS = 40
const LATENCY_MS = 20
// Generous: a leak of even a few hundred bytes per request held for the
// run would not show, but buffering requests without bound would.
const RSS_GROWTH_LIMIT = 200 * 1024 * 1024

t.test(`${CREATES} creates over ${CONNECTIONS} keep-alive connections while the database is slow`, { skip: needsPostgres }, async (t) => {
  const { proxy, proxiedUrl, testDb } = await proxiedDatabase(t)
  const server = await startServerProcess({ databaseUrl: proxiedUrl, env: { DB_TIMEOUT_MS: '10000' } })
  t.teardown(() => server.stop())
  await timeUntil(async () => (await request(`${server.url}/health/ready`)).status === 200, 20_000, 100)

  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  t.teardown(() => agent.destroy())
  let sockets = 0
  const create = agent.createConnection.bind(agent)
  agent.createConnection = (...args: Parameters<typeof create>) => {
    sockets++
    return create(...args)
  }
  const post = async (id: number) => await request(`${server.url}/plants`, {
    method: 'POST',
    agent,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id, name: `load-${id}`, tag: 'x'.repeat(Math.abs(id) % 64) })
  })

  // Warm up, then take the baseline.
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => post(-1 - i)))
  const baseline = server.rss()
  let peak = baseline
  const sampler = setInterval(() => { peak = Math.max(peak, server.rss()) }, 100)

  proxy.setLatency(LATENCY_MS)
  const statuses = new Map<number, number>()
  const acknowledged: number[] = []
  let next = 0
  const start = performance.now()
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (next < CREATES) {
      const id = next++
      const res = await post(id)
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      if (res.status === 200) acknowledged.push(id)
    }
  }))
  const elapsedMs = performance.now() - start
  clearInterval(sampler)
  peak = Math.max(peak, server.rss())
  proxy.setLatency(0)

  const rows = await storedRows(testDb.url)
  const loadRows = [...rows.values()].filter((r) => !r.id.startsWith('-'))
  t.same([...statuses.keys()], [200], 'every create answered 200')
  t.equal(acknowledged.length, CREATES, 'every create acknowledged')
  t.equal(loadRows.length, acknowledged.length, 'rows stored == 200s')
  const lost = acknowledged.filter((id) => rows.get(String(id))?.name !== `load-${id}`)
  t.same(lost, [], 'every acknowledged create is stored with its data')
  t.ok(sockets <= CONNECTIONS * 1.1, `requests reused keep-alive connections (${sockets} opened for ${CREATES + CONNECTIONS} requests)`)
  t.ok(peak - baseline < RSS_GROWTH_LIMIT, `RSS grew ${mb(peak - baseline)} MB (baseline ${mb(baseline)} MB, peak ${mb(peak)} MB)`)
  t.comment(`figures: creates=${CREATES} connections=${CONNECTIONS} latencyMs=${LATENCY_MS}/direction elapsedMs=${Math.round(elapsedMs)} perSecond=${Math.round(CREATES / elapsedMs * 1000)} rssBaselineMB=${mb(baseline)} rssPeakMB=${mb(peak)} lost=${lost.length}`)
})

const mb = (bytes: number): number => Math.round(bytes / 1024 / 1024)
