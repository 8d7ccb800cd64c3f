import t, { type Test } from 'tap'
import { listeningTestApp, TOKEN } from '../helper.js'
import { answeredStatuses, parseRawResponse, rawExchange, type Chunk } from '../support/http.js'
import { sleep } from '../support/postgres.js'

// An answer with Connection: close ends the connection: nothing sent after
// it is processed (the server ends its side and discards what still
// arrives), so a request that arrives late (after a 408) is never stored.
// The clients here are half-open: they ignore the server's FIN and go on
// sending, as a careless or hostile client does.
const TIMEOUTS = { headersTimeoutMs: 1000, requestTimeoutMs: 2000, keepAliveTimeoutMs: 5000, checkIntervalMs: 200 }
// Scheduling slack on a busy 2-core machine.
const SLACK_MS = 1500

const create = (id: number, name: string): string => {
  const body = JSON.stringify({ id, name })
  return `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

t.test('after a 408 nothing more is processed from the connection', async (t) => {
  const { app, port } = await listeningTestApp(t, 'pglite', { timeouts: TIMEOUTS })
  const storedIds = async (): Promise<string[]> =>
    (await app.db.query<{ id: string }>('SELECT id::text AS id FROM plants ORDER BY id')).map((r) => r.id)

  const expect408Closed = (t: Test, out: { response: string, closedByServer: boolean }): void => {
    const res = parseRawResponse(out.response)
    t.equal(res?.status, 408, '408')
    t.equal(res?.headers.connection, 'close', 'with Connection: close')
    t.same(answeredStatuses(out.response), [408], 'and no other answer')
    t.ok(out.closedByServer, 'the server ended the connection')
  }

  await t.test('headers that stall past the headers timeout, then arrive: 408, the create is not stored', async (t) => {
    const full = create(2001, 'late headers') + create(2002, 'pipelined after the 408')
    const split = full.indexOf('Content-Type')
    const chunks: Chunk[] = [
      { data: full.slice(0, split) },
      { delayMs: TIMEOUTS.headersTimeoutMs + TIMEOUTS.checkIntervalMs + SLACK_MS, data: full.slice(split) },
      { delayMs: 300, data: create(2003, 'later still') }
    ]
    const out = await rawExchange(port, chunks, 10_000, true, true)
    expect408Closed(t, out)
    await sleep(500)
    t.same(await storedIds(), [], 'none of the late creates was stored')
  })

  await t.test('a body that stalls past the request timeout, then arrives: 408, the create is not stored', async (t) => {
    const full = create(2101, 'late body')
    const split = full.length - 5
    const chunks: Chunk[] = [
      { data: full.slice(0, split) },
      { delayMs: TIMEOUTS.requestTimeoutMs + TIMEOUTS.checkIntervalMs + SLACK_MS, data: full.slice(split) + create(2102, 'pipelined after the 408') },
      { delayMs: 300, data: create(2103, 'later still') }
    ]
    const out = await rawExchange(port, chunks, 12_000, true, true)
    expect408Closed(t, out)
    await sleep(500)
    t.same(await storedIds(), [], 'none of the late creates was stored')
  })

  await t.test('a client trickling one byte at a time is answered 408 and closed', async (t) => {
    const chunks: Chunk[] = [{ data: 'POST /plants HTTP/1.1\r\nHost: localhost\r\nX-Slow: ' }]
    for (let i = 0; i < 80; i++) chunks.push({ delayMs: 100, data: 'a' })
    const out = await rawExchange(port, chunks, 12_000, true, true)
    expect408Closed(t, out)
    t.ok(out.elapsedMs < TIMEOUTS.headersTimeoutMs + TIMEOUTS.checkIntervalMs + SLACK_MS + 1000, `closed after ${out.elapsedMs} ms, while the client was still sending`)
  })

  await t.test('the service still answers', async (t) => {
    const out = await rawExchange(port, [{ data: create(2200, 'alive').replace('Content-Type', 'Connection: close\r\nContent-Type') }], 5000)
    t.same(answeredStatuses(out.response), [200])
    t.same(await storedIds(), ['2200'])
  })
})
