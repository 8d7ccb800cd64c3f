import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { MAX_HEADER_BYTES, edgeOptions, serverTimeouts } from '../../plugins/http-edge.js'
import { LINGER_MS } from '../../plugins/connection-rules.js'
import { assertErrorShape, listeningStubApp, testConfig, TOKEN } from '../helper.js'
import { parseRawResponse, rawExchange, type Chunk } from '../support/http.js'

// What a client can do to the server below the API: oversized and too many
// headers, and slow clients that would hold connections open. Node's own
// limits answer these (edgeOptions sets them deliberately);
// here they are shortened so the test sees them act.
// The request timeout stays above the 2 s an early answer waits for the body
// (plugins/http-edge.ts, holdClosingAnswer and bodyRead), as the production values are.
const TIMEOUTS = { headersTimeoutMs: 1000, requestTimeoutMs: 4000, keepAliveTimeoutMs: 1000, checkIntervalMs: 200 }
// Scheduling slack on a busy 2-core machine.
const SLACK_MS = 1500

const request = (lines: string[], body = ''): string => `${lines.join('\r\n')}\r\n\r\n${body}`
const createHead = (extra: string[] = []): string[] => [
  'POST /plants HTTP/1.1', 'Host: localhost', `Authorization: Bearer ${TOKEN}`, 'Content-Type: application/json', ...extra
]

function expectErrorAnswer (t: Test, raw: string, status: number): void {
  const res = parseRawResponse(raw)
  t.ok(res !== undefined, `an HTTP answer came back: ${JSON.stringify(raw.slice(0, 60))}`)
  if (res === undefined) return
  assertErrorShape(t, { statusCode: res.status, headers: res.headers, body: res.body }, status)
}

t.test('HTTP limits over a real socket', async (t) => {
  // Limits at the edge, before any store: the app runs over the stub store.
  const { port } = await listeningStubApp(t, { timeouts: TIMEOUTS })

  await t.test('a 1 MB Authorization header gets 431 in the Error shape', async (t) => {
    const head = `POST /plants HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAuthorization: Bearer ${'a'.repeat(1 << 20)}\r\n\r\n`
    const chunks: Chunk[] = []
    for (let i = 0; i < head.length; i += 16384) chunks.push({ delayMs: 1, data: head.slice(i, i + 16384) })
    const out = await rawExchange(port, chunks, 5000)
    t.ok(out.closedByServer, 'the server closes the connection')
    expectErrorAnswer(t, out.response, 431)
  })

  await t.test('an 8 KB token fits the header limit and gets 401', async (t) => {
    const out = await rawExchange(port, [{ data: request(['POST /plants HTTP/1.1', 'Host: localhost', 'Content-Type: application/json', `Authorization: Bearer ${'b'.repeat(8192)}`, 'Content-Length: 2', 'Connection: close'], '{}') }], 5000)
    expectErrorAnswer(t, out.response, 401)
  })

  await t.test('a 20 KB header line gets 431', async (t) => {
    const out = await rawExchange(port, [{ data: request([...createHead(), `X-Long: ${'c'.repeat(20_000)}`, 'Content-Length: 2'], '{}') }], 5000)
    expectErrorAnswer(t, out.response, 431)
  })

  await t.test('too many headers get 431; many small ones under the limit are fine', async (t) => {
    const many = Array.from({ length: 3000 }, (_, i) => `X-H${i}: v`)
    const out = await rawExchange(port, [{ data: request(['GET /health/live HTTP/1.1', 'Host: localhost', ...many]) }], 5000)
    expectErrorAnswer(t, out.response, 431)
    const some = Array.from({ length: 500 }, (_, i) => `X-H${i}: v`)
    const ok = await rawExchange(port, [{ data: request(['GET /health/live HTTP/1.1', 'Host: localhost', 'Connection: close', ...some]) }], 5000)
    t.equal(parseRawResponse(ok.response)?.status, 200, '500 small headers: 200')
  })

  await t.test('a client trickling its headers is cut off after headersTimeout', async (t) => {
    const chunks: Chunk[] = [{ data: 'POST /plants HTTP/1.1\r\nHost: localhost\r\n' }]
    for (let i = 0; i < 100; i++) chunks.push({ delayMs: 100, data: `X-Slow-${i}: a\r\n` })
    const out = await rawExchange(port, chunks, 10_000)
    t.ok(out.closedByServer, 'the server closed the connection')
    t.ok(out.elapsedMs <= TIMEOUTS.headersTimeoutMs + TIMEOUTS.checkIntervalMs + SLACK_MS, `after ${out.elapsedMs} ms (headersTimeout ${TIMEOUTS.headersTimeoutMs} ms)`)
    expectErrorAnswer(t, out.response, 408)
  })

  await t.test('a client that connects and sends nothing is cut off after headersTimeout', async (t) => {
    const out = await rawExchange(port, [], 10_000)
    t.ok(out.closedByServer, 'the server closed the connection')
    t.ok(out.elapsedMs <= TIMEOUTS.headersTimeoutMs + TIMEOUTS.checkIntervalMs + SLACK_MS, `after ${out.elapsedMs} ms`)
  })

  await t.test('a client trickling its body is cut off after requestTimeout', async (t) => {
    const chunks: Chunk[] = [{ data: request([...createHead(), 'Content-Length: 200']) }]
    for (let i = 0; i < 200; i++) chunks.push({ delayMs: 100, data: ' ' })
    const out = await rawExchange(port, chunks, 10_000)
    t.ok(out.closedByServer, 'the server closed the connection')
    t.ok(out.elapsedMs <= TIMEOUTS.requestTimeoutMs + TIMEOUTS.checkIntervalMs + SLACK_MS, `after ${out.elapsedMs} ms (requestTimeout ${TIMEOUTS.requestTimeoutMs} ms)`)
    expectErrorAnswer(t, out.response, 408)
  })

  await t.test('an idle keep-alive connection is closed after keepAliveTimeout', async (t) => {
    const out = await rawExchange(port, [{ data: request(['GET /health/live HTTP/1.1', 'Host: localhost']) }], 10_000)
    t.equal(parseRawResponse(out.response)?.status, 200, 'answered')
    t.ok(out.closedByServer, 'then closed by the server')
    t.match(parseRawResponse(out.response)?.headers['keep-alive'], `timeout=${TIMEOUTS.keepAliveTimeoutMs / 1000}`, 'the answer announces the idle timeout')
    // Node holds the socket 1 s longer than it announces, so the client,
    // told the shorter time, closes first and never reuses a dying socket.
    t.ok(out.elapsedMs <= TIMEOUTS.keepAliveTimeoutMs + 1000 + SLACK_MS, `after ${out.elapsedMs} ms (keepAliveTimeout ${TIMEOUTS.keepAliveTimeoutMs} ms + 1 s)`)
  })

  // The answer waits for the body, read and discarded, for at most LINGER_MS.
  await t.test('an answer given before the body arrived closes the connection: no second answer', async (t) => {
    const head = ['POST /plants HTTP/1.1', 'Host: localhost', 'Authorization: Bearer wrong', 'Content-Type: application/json', 'Content-Length: 200']
    const chunks: Chunk[] = [{ data: request(head) }]
    for (let i = 0; i < 40; i++) chunks.push({ delayMs: 100, data: ' ' })
    // A client that goes on sending its body regardless.
    const out = await rawExchange(port, chunks, 10_000, true)
    const res = parseRawResponse(out.response)
    t.equal(res?.status, 401, 'answered 401 without parsing the body')
    t.equal(res?.headers.connection, 'close', 'and said the connection ends')
    t.equal(out.response.match(/HTTP\/1\.1 \d{3}/g)?.length, 1, 'exactly one answer on the connection')
    t.ok(out.closedByServer && out.elapsedMs < LINGER_MS + SLACK_MS, `closed after ${out.elapsedMs} ms, before the request timeout`)
  })

  await t.test('after all that the service still answers', async (t) => {
    const out = await rawExchange(port, [{ data: request([...createHead(), 'Content-Length: 31', 'Connection: close'], '{"id": 200000, "name": "alive"}') }], 5000)
    t.equal(parseRawResponse(out.response)?.status, 200)
  })
})

t.test('the production limits reach the Node server', async (t) => {
  const app = Fastify(edgeOptions({ ...testConfig({ kind: 'pglite', dataDir: 'memory://' }), dbTimeoutMs: 5000 }))
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const server = app.server as typeof app.server & { headersTimeout: number, requestTimeout: number, keepAliveTimeout: number, timeout: number, maxHeaderSize?: number }
  t.same(
    { headers: server.headersTimeout, request: server.requestTimeout, keepAlive: server.keepAliveTimeout, idle: server.timeout, maxHeaderSize: server.maxHeaderSize },
    { headers: 10_000, request: 30_000, keepAlive: 65_000, idle: 60_000, maxHeaderSize: MAX_HEADER_BYTES }
  )
  t.ok(serverTimeouts({ dbTimeoutMs: 120_000 }).connectionTimeoutMs > 4 * 120_000 + 1000,
    'the idle limit outlasts the longest a create can take (queue, retries, connect, statement, read)')
})
