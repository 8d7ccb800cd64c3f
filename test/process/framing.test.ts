import t from 'tap'
import { forEachBackend, listeningTestApp, TOKEN } from '../helper.js'
import { answeredStatuses, parseRawResponse, rawExchange } from '../support/http.js'
import { sleep } from '../support/postgres.js'

// Framing the service does not implement is refused in the Error shape and
// closes the connection: a transfer coding other than chunked is 501
// (nothing processed, the body not read), and CONNECT, which asks a proxy
// for a tunnel, gets an Error answer instead of a silent close.

const plantBody = (id: number): string => JSON.stringify({ id, name: `framed ${id}` })

const chunked = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`

const createHead = (lines: string[]): string =>
  ['POST /plants HTTP/1.1', 'Host: localhost', `Authorization: Bearer ${TOKEN}`, 'Content-Type: application/json', ...lines].join('\r\n') + '\r\n\r\n'

const create = (id: number): string => createHead([`Content-Length: ${Buffer.byteLength(plantBody(id))}`]) + plantBody(id)

// The body of an answer, parsed; what is not one JSON object counts as {}.
function errorBodyOf (text: string | undefined): Record<string, unknown> {
  try {
    const body: unknown = JSON.parse(text ?? '')
    return body !== null && typeof body === 'object' ? body as Record<string, unknown> : {}
  } catch {
    return {}
  }
}

forEachBackend(t, 'framing', async (t, backend) => {
  const { app, port } = await listeningTestApp(t, backend)
  const storedIds = async (): Promise<number[]> =>
    (await app.db.query<{ id: string }>('SELECT id::text AS id FROM plants ORDER BY id')).map((r) => Number(r.id))

  const codings: Array<[string, string[]]> = [
    ['gzip, chunked', ['Transfer-Encoding: gzip, chunked']],
    ['deflate, chunked', ['Transfer-Encoding: deflate, chunked']],
    ['x-unknown, chunked', ['Transfer-Encoding: x-unknown, chunked']],
    ['gzip and chunked in two headers', ['Transfer-Encoding: gzip', 'Transfer-Encoding: chunked']]
  ]
  for (const [i, [what, lines]] of codings.entries()) {
    await t.test(`Transfer-Encoding ${what}: 501 in the Error shape, nothing stored, nothing after it`, async (t) => {
      const id = 8001 + i
      const out = await rawExchange(port, [{ data: createHead(lines) + chunked(plantBody(id)) + create(id + 100) }], 10_000)
      const res = parseRawResponse(out.response)
      t.equal(res?.status, 501, '501')
      t.equal(res?.headers.connection, 'close', 'Connection: close')
      t.match(res?.headers['content-type'], /^application\/json/)
      const body = errorBodyOf(res?.body)
      t.same(Object.keys(body).sort(), ['error', 'message'], 'the Error shape')
      t.equal(body.error, 501)
      t.same(answeredStatuses(out.response), [501], 'and no other answer')
      t.ok(out.closedByServer, 'the connection closed')
      await sleep(300)
      const stored = await storedIds()
      t.notOk(stored.includes(id), 'the create was not stored')
      t.notOk(stored.includes(id + 100), 'nor the one pipelined behind it')
    })
  }

  await t.test('plain chunked (any case) is still a create', async (t) => {
    const out = await rawExchange(port, [{ data: createHead(['Transfer-Encoding: Chunked', 'Connection: close']) + chunked(plantBody(8101)) }], 10_000)
    t.same(answeredStatuses(out.response), [200])
    t.ok((await storedIds()).includes(8101))
  })

  await t.test('CONNECT host:443: an Error answer, then the connection closes', async (t) => {
    const out = await rawExchange(port, [{ data: 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n' }], 10_000)
    const res = parseRawResponse(out.response)
    t.equal(res?.status, 400, '400')
    t.equal(res?.headers.connection, 'close', 'Connection: close')
    t.match(res?.headers['content-type'], /^application\/json/)
    t.ok(typeof res?.headers['x-request-id'] === 'string', 'with a request id')
    const body = errorBodyOf(res?.body)
    t.same(Object.keys(body).sort(), ['error', 'message'], 'the Error shape')
    t.match(body, { error: 400, message: /CONNECT/ })
    t.ok(out.closedByServer, 'the connection closed')
  })

  await t.test('a create, then CONNECT in one packet: the create keeps its 200, the CONNECT is not answered', async (t) => {
    const out = await rawExchange(port, [{ data: create(8201) + 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n' + create(8202) }], 10_000)
    await sleep(300)
    const stored = await storedIds()
    t.ok(stored.includes(8201), 'the create was stored')
    t.same(answeredStatuses(out.response), [200], 'so it was answered 200, and nothing after it')
    t.notOk(stored.includes(8202), 'nothing after the CONNECT was processed')
    t.ok(out.closedByServer, 'the connection closed')
  })
})
