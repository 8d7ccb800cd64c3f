import t from 'tap'
import { forEachBackend, listeningTestApp, TOKEN } from '../helper.js'
import { answeredStatuses, halfClosedExchange, rawExchange } from '../support/http.js'
import { sleep } from '../support/postgres.js'

// Several requests in one packet (HTTP/1.1 pipelining). Whatever follows,
// a create that was stored is answered, in order: the answers on the wire
// line up with the requests, and a request after an answer that closed the
// connection is never processed.

const create = (id: number, opts: { token?: string, extra?: string } = {}): string => {
  const body = JSON.stringify({ id, name: `pipelined ${id}` })
  return `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${opts.token ?? TOKEN}\r\n${opts.extra ?? ''}` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

forEachBackend(t, 'pipelined requests', async (t, backend) => {
  const { app, port } = await listeningTestApp(t, backend)
  const storedIds = async (): Promise<number[]> =>
    (await app.db.query<{ id: string }>('SELECT id::text AS id FROM plants ORDER BY id')).map((r) => Number(r.id))

  await t.test('a valid create, then a garbage request line: the create is answered 200 before the 400', async (t) => {
    const out = await rawExchange(port, [{ data: `${create(3001)}GARBAGE\r\n\r\n` }], 10_000)
    await sleep(300)
    t.same(await storedIds(), [3001], 'the create was stored')
    t.same(answeredStatuses(out.response), [200, 400], 'so it was answered, first; then the 400')
    t.ok(out.closedByServer, 'then the connection closed')
  })

  await t.test('create, wrong token, create: every stored create is answered, in order', async (t) => {
    const out = await rawExchange(port, [{ data: create(3101) + create(3102, { token: 'wrong' }) + create(3103) }], 10_000)
    await sleep(300)
    const stored = (await storedIds()).filter((id) => id > 3100 && id < 3200)
    const answers = answeredStatuses(out.response)
    t.notOk(stored.includes(3102), 'the unauthenticated create was not stored')
    t.same(answers.slice(0, 2), [200, 401], 'the first create 200, then the 401')
    if (stored.includes(3103)) t.same(answers, [200, 401, 200], 'the third create was stored, so it was answered 200')
    else t.same(answers, [200, 401], 'the third create was not stored, and not answered')
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

  await t.test('two pipelined creates, then a half-close: both answered, in order, then closed', async (t) => {
    const out = await halfClosedExchange(port, create(3502) + create(3503), 10_000)
    t.same(answeredStatuses(out.response), [200, 200], 'both answered')
    t.ok(out.closedByServer, 'then the server closed its side too')
    t.same((await storedIds()).filter((id) => id === 3502 || id === 3503), [3502, 3503])
  })

  await t.test('pipelined creates on a healthy connection are all answered, in order', async (t) => {
    const ids = [3301, 3302, 3303, 3304, 3305]
    const out = await rawExchange(port, [{ data: ids.map((id) => create(id)).join('') + create(3306, { extra: 'Connection: close\r\n' }) }], 10_000)
    t.same(answeredStatuses(out.response), [200, 200, 200, 200, 200, 200])
    const names = [...out.response.matchAll(/"name":"pipelined (\d+)"/g)].map((m) => Number(m[1]))
    t.same(names, [...ids, 3306], 'each answer carries its own plant, in request order')
  })
})
