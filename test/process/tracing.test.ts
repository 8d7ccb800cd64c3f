import t from 'tap'
import { createServer, type IncomingMessage } from 'node:http'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { Writable } from 'node:stream'
import { jsonHeaders, testConfig, type Teardown } from '../helper.js'
import { stubStore } from '../support/stub-store.js'
import { request } from '../support/http.js'
import { startServerProcess } from '../support/processes.js'
import { buildApp } from '../../app.js'

// Traces: the service as a real process with the standard OTEL_* variables,
// exporting to an OTLP/HTTP receiver on loopback.

interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  attributes?: Array<{ key: string, value: Record<string, unknown> }>
}
interface Received { path: string, contentType: string, spans: OtlpSpan[] }

async function otlpReceiver (t: Teardown): Promise<{ url: string, received: Received[] }> {
  const received: Received[] = []
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const contentType = req.headers['content-type'] ?? ''
      let spans: OtlpSpan[] = []
      if (contentType.startsWith('application/json')) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> }
        spans = body.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))
      }
      received.push({ path: req.url ?? '', contentType, spans })
      res.writeHead(200, { 'content-type': contentType.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' })
      res.end(contentType.startsWith('application/json') ? '{}' : '')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => { server.closeAllConnections(); server.close() })
  const address = server.address() as { port: number }
  return { url: `http://127.0.0.1:${address.port}`, received }
}

async function until<T> (what: string, find: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const started = Date.now()
  for (;;) {
    const found = find()
    if (found !== undefined) return found
    if (Date.now() - started > timeoutMs) throw new Error(`${what} did not arrive within ${timeoutMs} ms`)
    await sleep(100)
  }
}

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN = '00f067aa0ba902b7'
const TRACEPARENT = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`

const attribute = (span: OtlpSpan, key: string): unknown => {
  const value = span.attributes?.find((a) => a.key === key)?.value
  return value === undefined ? undefined : Object.values(value)[0]
}

t.test('OTLP/HTTP json: the request span continues the caller\'s trace, with a database child span; logs carry its id', async (t) => {
  const receiver = await otlpReceiver(t)
  const server = await startServerProcess({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'plant-store-under-test',
      OTEL_BSP_SCHEDULE_DELAY: '100'
    }
  })
  t.teardown(() => server.stop())

  const res = await request(`${server.url}/plants`, {
    method: 'POST',
    headers: { ...jsonHeaders(), traceparent: TRACEPARENT, 'x-request-id': 'traced-create-1' },
    body: JSON.stringify({ id: 42, name: 'Fern' })
  })
  t.equal(res.status, 200)

  const spans = (): OtlpSpan[] => receiver.received.flatMap((r) => r.spans)
  const requestSpan = await until('the request span', () => spans().find((s) => s.name === 'POST /plants' && s.traceId === CALLER_TRACE))
  t.equal(requestSpan.parentSpanId, CALLER_SPAN, 'a child of the caller\'s span')
  t.equal(attribute(requestSpan, 'http.route'), '/plants')
  t.equal(attribute(requestSpan, 'http.response.status_code'), 200)
  const write = await until('the database span', () => spans().find((s) => s.name === 'plant_store.write' && s.parentSpanId === requestSpan.spanId))
  t.equal(write.traceId, CALLER_TRACE, 'in the same trace')
  t.equal(Number(attribute(write, 'plant_store.batch.size')), 1, 'the batch size')
  t.ok(Number(attribute(write, 'plant_store.batch.id')) >= 1, 'the batch it joined')
  t.ok(receiver.received.every((r) => r.path === '/v1/traces' && r.contentType.startsWith('application/json')), 'POST /v1/traces as JSON')

  // Log lines are written in the background: wait for the access line.
  await until('the access line', () => server.logs.find((l) => l.reqId === 'traced-create-1' && l.msg === 'request' && l.route === '/plants' && l.status === 200))
  const lines = server.logs.filter((l) => l.reqId === 'traced-create-1')
  t.ok(lines.every((l) => l.trace_id === CALLER_TRACE), 'every one carries the caller\'s trace id')

  // A request without traceparent starts a trace; its lines after the
  // first carry that trace's id.
  await request(`${server.url}/plants`, { method: 'POST', headers: { ...jsonHeaders(), 'x-request-id': 'untraced-1' }, body: JSON.stringify({ id: 43, name: 'Fern' }) })
  const own = await until('the new trace', () => spans().find((s) => s.name === 'POST /plants' && s.traceId !== CALLER_TRACE))
  t.equal(own.parentSpanId ?? '', '', 'a root span')
  const completed = await until('the log line', () => server.logs.find((l) => l.reqId === 'untraced-1' && l.msg === 'request'))
  t.equal(completed.trace_id, own.traceId, 'its logs carry the new trace id')
})

t.test('OTLP/HTTP protobuf is the default encoding', async (t) => {
  const receiver = await otlpReceiver(t)
  const server = await startServerProcess({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' } })
  t.teardown(() => server.stop())
  t.equal((await request(`${server.url}/plants`, { method: 'POST', headers: jsonHeaders(), body: JSON.stringify({ id: 1, name: 'Fern' }) })).status, 200)
  const batch = await until('an export', () => receiver.received[0])
  t.equal(batch.path, '/v1/traces')
  t.equal(batch.contentType, 'application/x-protobuf')
})

t.test('without OTEL_EXPORTER_OTLP_ENDPOINT: no SDK, and a caller\'s trace id still on every log line', async (t) => {
  const logs: Array<Record<string, unknown>> = []
  const stream = new Writable({ write (chunk, _encoding, done) { logs.push(JSON.parse(String(chunk))); done() } })
  // Log lines, not rows: the app runs over the stub store.
  const app = await buildApp({ config: testConfig({ kind: 'pglite', dataDir: 'memory://' }), logger: { level: 'info', stream }, store: stubStore() })
  t.teardown(() => app.close())
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  t.notOk(app.hasPlugin('@fastify/otel'), 'the instrumentation is not registered')
  t.equal((await request(`${url}/plants`, { method: 'POST', headers: { ...jsonHeaders(), traceparent: TRACEPARENT, 'x-request-id': 'plain-1' }, body: JSON.stringify({ id: 1, name: 'Fern' }) })).status, 200)
  const lines = logs.filter((l) => l.reqId === 'plain-1')
  t.ok(lines.some((l) => l.msg === 'request' && l.status === 200), 'the access line is there')
  t.ok(lines.every((l) => l.trace_id === CALLER_TRACE), 'all with trace_id')
  // An invalid traceparent (all-zero trace id) is ignored.
  await request(`${url}/plants`, { method: 'POST', headers: { ...jsonHeaders(), traceparent: `00-${'0'.repeat(32)}-${CALLER_SPAN}-01`, 'x-request-id': 'plain-2' }, body: JSON.stringify({ id: 2, name: 'Fern' }) })
  const invalid = logs.filter((l) => l.reqId === 'plain-2')
  t.ok(invalid.length > 0 && invalid.every((l) => l.trace_id === undefined), 'no trace_id from an invalid header')
})
