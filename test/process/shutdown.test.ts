import t from 'tap'
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { forEachBackend, createTestDatabase } from '../helper.js'
import { freePort, jsonLines, stageRuntime, startBuiltServer } from '../support/processes.js'
import { storedPlants } from '../support/database.js'
import { migratedTempDataDir } from '../support/pglite-template.js'

// server.ts drains in-flight requests for this long after SIGTERM.
const SHUTDOWN_GRACE_MS = 5_000

// A deploy or restart sends SIGTERM while creates are in flight. Refused or
// cut-off requests are allowed (the client retries; creates are idempotent),
// but every create that was answered 200 must be in the database.
const TOTAL = 400
const CONNECTIONS = 32
const SIGNAL_AFTER = 120
const TOKEN = 'shutdown-test-token-5d1e'

interface Outcome {
  id: number
  started: number
  ended: number
  status?: number
  body?: string
  headers?: http.IncomingHttpHeaders
  error?: string
}

let runtime = ''
t.before(async () => { runtime = await stageRuntime() })

forEachBackend(t, `SIGTERM during ${TOTAL} creates over ${CONNECTIONS} keep-alive connections`, async (t, backend) => {
  const testDb = backend === 'postgres' ? await createTestDatabase('postgres') : undefined
  if (testDb !== undefined) t.teardown(() => testDb.drop())
  const pgliteDir = await migratedTempDataDir(t)
  const port = await freePort()
  const server = startBuiltServer(t, runtime, {
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: String(port),
    API_TOKENS: TOKEN,
    LOG_LEVEL: 'info',
    ...(testDb?.url === undefined ? { PGLITE_DATA_DIR: pgliteDir } : { DATABASE_URL: testDb.url })
  })
  await server.waitFor(`http://127.0.0.1:${port}/health/ready`)

  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  t.teardown(() => agent.destroy())
  const create = async (id: number): Promise<Outcome> => await new Promise((resolve) => {
    const started = performance.now()
    const body = JSON.stringify({ id, name: `plant-${id}` })
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/plants',
      agent,
      timeout: 15_000,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-request-id': `sd-${id}` }
    }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { text += chunk })
      res.on('end', () => resolve({ id, started, ended: performance.now(), status: res.statusCode as number, body: text, headers: res.headers }))
      res.on('error', (err: NodeJS.ErrnoException) => resolve({ id, started, ended: performance.now(), error: err.code ?? err.message }))
    })
    req.on('timeout', () => req.destroy(Object.assign(new Error('client timeout'), { code: 'CLIENT_TIMEOUT' })))
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ id, started, ended: performance.now(), error: err.code ?? err.message }))
    req.end(body)
  })

  const outcomes: Outcome[] = []
  let next = 1
  let signalledAt = Infinity
  const worker = async (): Promise<void> => {
    while (next <= TOTAL) {
      const outcome = await create(next++)
      outcomes.push(outcome)
      if (outcomes.length === SIGNAL_AFTER) {
        signalledAt = performance.now()
        server.signal('SIGTERM')
      }
    }
  }
  await Promise.all(Array.from({ length: CONNECTIONS }, worker))
  // Done, the client closes its idle connections. Node's close closes only
  // the connections idle when it begins: one whose answer was under way then
  // stays open, idle, until the client closes it or the drain bound does.
  agent.destroy()
  const exit = await Promise.race([server.exited, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), SHUTDOWN_GRACE_MS + 10_000))])
  const drainMs = performance.now() - signalledAt
  t.same(exit, { code: 0, signal: null }, 'exit code 0')
  t.ok(drainMs < SHUTDOWN_GRACE_MS, `drained within the drain bound (${Math.round(drainMs)} ms)`)

  const ok = outcomes.filter((o) => o.status === 200)
  const refused = outcomes.filter((o) => o.status !== undefined && o.status !== 200)
  const failed = outcomes.filter((o) => o.error !== undefined)
  const inFlight = ok.filter((o) => o.started < signalledAt && o.ended > signalledAt)
  t.comment(`${backend}: ${ok.length} × 200 (${inFlight.length} of them in flight at SIGTERM), ${refused.length} × 503, ` +
    `${failed.length} connection errors [${[...new Set(failed.map((o) => o.error))].join(', ')}], drain ${Math.round(drainMs)} ms`)
  t.equal(outcomes.length, TOTAL, 'every request settled')
  t.same(outcomes.filter((o) => o.ended < signalledAt && o.status !== 200), [], 'before SIGTERM every create answered 200')
  t.ok(inFlight.length > 0, 'creates in flight at SIGTERM were finished and answered')
  t.ok(ok.length < TOTAL, 'the load outlasted the server, so the refusal path ran')

  for (const o of refused) {
    t.equal(o.status, 503, `id ${o.id}: refused with 503`)
    t.same(JSON.parse(o.body ?? '{}'), { error: 503, message: 'The service is shutting down; retry later' }, `id ${o.id}: in the Error shape`)
    t.ok(o.headers?.['retry-after'] !== undefined && o.headers?.['x-request-id'] !== undefined, `id ${o.id}: Retry-After and X-Request-Id`)
    t.equal(o.headers?.connection, 'close', `id ${o.id}: the connection closes`)
  }
  t.same([...new Set(failed.map((o) => o.error))].filter((e) => !['ECONNREFUSED', 'ECONNRESET', 'EPIPE'].includes(e as string)), [],
    'failures are only refused or closed connections')

  const rows = await storedPlants(testDb?.url, pgliteDir)
  const stored = new Map(rows.map((r) => [r.id, r.name]))
  const missing = ok.filter((o) => stored.get(String(o.id)) !== `plant-${o.id}`).map((o) => o.id)
  t.same(missing, [], `all ${ok.length} acknowledged creates are stored`)
  t.ok(rows.length >= ok.length && rows.every((r) => Number(r.id) >= 1 && Number(r.id) <= TOTAL), 'nothing else is stored')

  const { lines, other } = jsonLines(server.stdout())
  t.same(other, [], 'JSON log lines only')
  // Lines are written in the background (src/logger.ts) and flushed before
  // the exit: every answer the client received has its access line, with
  // the status the client saw, and the log ends with the shutdown.
  t.ok(lines.some((l) => l.msg === 'stopped'), 'it logged that it stopped')
  const access = new Map(lines.filter((l) => l.msg === 'request' && l.route === '/plants').map((l) => [l.reqId, l.status]))
  const answered = outcomes.filter((o) => o.status !== undefined)
  t.same(answered.filter((o) => access.get(`sd-${o.id}`) !== o.status).map((o) => o.id), [],
    `all ${answered.length} answers the client received have their access line`)
  t.notOk(server.stdout().includes(TOKEN) || server.stderr().includes(TOKEN), 'the token is never printed')
})
