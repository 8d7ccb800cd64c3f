import t from 'tap'
import { forEachBackend, listeningTestApp, TOKEN } from '../helper.js'
import { answeredStatuses, halfClosedExchange, rawExchange } from '../support/http.js'
import { sleep } from '../support/postgres.js'

// Several requests in one packet (HTTP/1.1 pipelining), served one at a
// time: a request that arrives before the answer to the one before it is
// written is not processed, and the connection closes after that answer
// (the client retries what was not answered): gracefully, with no
// Connection header on that answer. A create that was stored
// keeps its answer; nothing unanswered is stored; a request after an answer
// that closed the connection is never processed.

const create = (id: number, opts: { token?: string, extra?: string } = {}): string => {
  const body = JSON.stringify({ id, name: `pipelined ${id}` })
  return `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${opts.token ?? TOKEN}\r\n${opts.extra ?? ''}` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

forEachBackend(t, 'pipelined requests', async (t, backend) => {
  const { app, port } = await listeningTestApp(t, backend)
  const storedIds = async (): Promise<number[]> =>
    (await app.db.query<{ id: string }>('SELECT id::text AS id FROM plants ORDER BY id')).map((r) => Number(r.id))

  await t.test('a valid create, then a garbage request line: the create keeps its 200, then the connection closes', async (t) => {
    const out = await rawExchange(port, [{ data: `${create(3001)}GARBAGE\r\n\r\n` }], 10_000)
    await sleep(300)
    t.same(await storedIds(), [3001], 'the create was stored')
    t.same(answeredStatuses(out.response), [200], 'so it was answered; the garbage was not')
    t.notMatch(out.response, /\r\nconnection:/i, 'with no Connection header: no keep-alive promised (a close header would make Node reset the socket)')
    t.ok(out.closedByServer, 'then the connection closed')
  })

  await t.test('create, wrong token, create: the first is answered, the others are not processed', async (t) => {
    const out = await rawExchange(port, [{ data: create(3101) + create(3102, { token: 'wrong' }) + create(3103) }], 10_000)
    await sleep(300)
    t.same(answeredStatuses(out.response), [200], 'the first create 200, nothing after it')
    t.notMatch(out.response, /\r\nconnection:/i, 'with no Connection header: no keep-alive promised (a close header would make Node reset the socket)')
    t.ok(out.closedByServer, 'then the connection closed')
    t.same((await storedIds()).filter((id) => id > 3100 && id < 3200), [3101], 'only the answered create was stored')
  })

  await t.test('a request after one that asked for Connection: close is not processed', async (t) => {
    const out = await rawExchange(port, [{ data: create(3201, { extra: 'Connection: close\r\n' }) + create(3202) + create(3203) }], 10_000)
    await sleep(300)
    t.same((await storedIds()).filter((id) => id > 3200), [3201], 'only the first create was stored')
    t.same(answeredStatuses(out.response), [200], 'and answered; nothing after it')
    t.ok(out.closedByServer, 'the connection closed')
  })

  // Each answer here is given before its request's body is read, so it
  // carries Connection: close; the create behind it arrives in the same
  // packet and must never be processed.
  const closingFronts: Array<[string, number, string]> = [
    ['PUT with a 2-byte body', 405, 'PUT /plants HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'],
    ['a wrong token', 401, create(3401, { token: 'wrong' })],
    ['no token', 401, 'POST /plants HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'],
    ['text/plain', 415, `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}`],
    ['an unknown route with a body', 404, 'POST /nowhere HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'],
    ['no Host', 400, `POST /plants HTTP/1.1\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`]
  ]
  for (const [i, [what, status, front]] of closingFronts.entries()) {
    await t.test(`one packet: ${what} (${status}), then a valid create: only the ${status}, nothing stored`, async (t) => {
      const id = 3410 + i
      const out = await rawExchange(port, [{ data: front + create(id) }], 10_000)
      await sleep(300)
      t.same(answeredStatuses(out.response), [status], `the ${status} and nothing after it`)
      t.match(out.response, /\r\nconnection: close\r\n/i, 'with Connection: close')
      t.ok(out.closedByServer, 'the connection closed')
      t.notOk((await storedIds()).includes(id), 'the create behind it was not stored')
    })
  }

  await t.test('a client that half-closes after its create gets its 200, then the connection closes', async (t) => {
    const out = await halfClosedExchange(port, create(3501), 10_000)
    t.same(answeredStatuses(out.response), [200], 'answered 200')
    t.ok(out.closedByServer, 'then the server closed its side too')
    t.ok((await storedIds()).includes(3501), 'and the create was stored')
  })

  await t.test('two pipelined creates, then a half-close: the first answered, then closed; the second not stored', async (t) => {
    const out = await halfClosedExchange(port, create(3502) + create(3503), 10_000)
    t.same(answeredStatuses(out.response), [200], 'the first answered')
    t.ok(out.closedByServer, 'then the server closed its side too')
    await sleep(300)
    t.same((await storedIds()).filter((id) => id === 3502 || id === 3503), [3502])
  })

  await t.test('pipelined creates on a healthy connection: the first is answered, the rest not processed', async (t) => {
    const ids = [3301, 3302, 3303, 3304, 3305]
    const out = await rawExchange(port, [{ data: ids.map((id) => create(id)).join('') }], 10_000)
    t.same(answeredStatuses(out.response), [200], 'one answer')
    t.match(out.response, /"name":"pipelined 3301"/, 'to the first create')
    t.notMatch(out.response, /\r\nconnection:/i, 'with no Connection header: no keep-alive promised (a close header would make Node reset the socket)')
    t.ok(out.closedByServer, 'then the connection closed')
    await sleep(300)
    t.same((await storedIds()).filter((id) => id > 3300 && id < 3400), [3301], 'nothing unanswered was stored')
  })

  await t.test('one request at a time on a keep-alive connection is served in turn', async (t) => {
    const out = await rawExchange(port, [
      { data: create(3601) },
      { delayMs: 500, data: create(3602, { extra: 'Connection: close\r\n' }) }
    ], 10_000, true)
    t.same(answeredStatuses(out.response), [200, 200], 'both answered')
    t.same((await storedIds()).filter((id) => id > 3600 && id < 3700), [3601, 3602])
  })
})
