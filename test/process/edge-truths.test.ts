import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { createTestDatabase, forEachBackend, TOKEN } from '../helper.js'
import { answeredStatuses, parseAnswers, rawExchange, request } from '../support/http.js'
import { startServerProcess, type SourceServer } from '../support/processes.js'
import { untilReady } from '../support/big-creates.js'

// What the edge tells the truth about, over real sockets to a real process:
// a URL that does not decode is answered like every other closing answer, and
// a header that may appear once (Authorization) sent twice is refused before
// auth.

const create = (id: number, extra = ''): string => {
  const body = JSON.stringify({ id, name: `behind ${id}` })
  return `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\n${extra}` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

// Whether a create of this id was stored: the same id with another name is
// a conflict (409) when it was, and is stored itself (200) when it was not.
async function stored (server: SourceServer, id: number): Promise<boolean> {
  const res = await request(`${server.url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id, name: 'asked afterwards' })
  })
  if (res.status !== 200 && res.status !== 409) throw new Error(`create ${id} answered ${res.status}: ${res.body}`)
  return res.status === 409
}

forEachBackend(t, 'the truth at the edge', async (t, backend) => {
  const testDb = await createTestDatabase(backend)
  t.teardown(() => testDb.drop())
  const server = await startServerProcess({
    ...(testDb.url === undefined ? {} : { databaseUrl: testDb.url }),
    startTimeoutMs: 60_000
  })
  t.teardown(() => server.stop())
  const port = Number(new URL(server.url).port)
  await untilReady(server.url)
  let nextId = 1

  const undecodable: Array<[string, string]> = [
    ['GET /%zz', 'GET /%zz HTTP/1.1\r\nHost: localhost\r\n\r\n'],
    ['POST /plants%zz with a body', `POST /plants%zz HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 25\r\n\r\n{"id":1,"name":"bad url"}'],
    ['a bad escape further on', 'GET /plants/%e0%a4%a HTTP/1.1\r\nHost: localhost\r\n\r\n']
  ]
  for (const [what, front] of undecodable) {
    await t.test(`${what}, then a create in the same packet: 400 with Connection: close, the create never processed`, async (t) => {
      const id = nextId++
      const out = await rawExchange(port, [{ data: front + create(id) }], 5_000)
      await sleep(300)
      const answers = parseAnswers(out.response)
      t.same(answers.map((a) => a.status), [400], 'the 400 and nothing after it')
      t.equal(answers[0]?.headers.connection, 'close', 'with Connection: close')
      t.equal(JSON.parse(answers[0]?.body ?? '{}').error, 400, 'in the Error shape')
      t.ok(out.closedByServer, 'then the server ended the connection')
      t.notOk(await stored(server, id), 'the create behind it was not stored')
    })
  }

  await t.test('a URL that does not decode, its body still on the way: the 400 arrives whole, then a FIN', async (t) => {
    const head = 'POST /plants%zz HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 300000\r\n\r\n'
    const chunks = [{ data: head }, ...Array.from({ length: 6 }, () => ({ delayMs: 20, data: 'x'.repeat(50_000) }))]
    const out = await rawExchange(port, chunks, 5_000, true)
    t.same(answeredStatuses(out.response), [400], 'answered 400')
    t.ok(out.closedByServer, 'and the connection ended by the server, not reset before the answer')
  })

  const twice: Array<[string, string]> = [
    ['a valid token, then a wrong one', `Authorization: Bearer ${TOKEN}\r\nAuthorization: Bearer wrong\r\n`],
    ['a wrong token, then a valid one', `Authorization: Bearer wrong\r\nAuthorization: Bearer ${TOKEN}\r\n`],
    ['the valid token twice', `Authorization: Bearer ${TOKEN}\r\nAuthorization: Bearer ${TOKEN}\r\n`]
  ]
  for (const [what, lines] of twice) {
    await t.test(`two Authorization headers (${what}): 400 before auth, nothing stored, the connection closed`, async (t) => {
      const id = nextId++
      const body = JSON.stringify({ id, name: 'two tokens' })
      const out = await rawExchange(port, [{
        data: `POST /plants HTTP/1.1\r\nHost: localhost\r\n${lines}Content-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}` + create(nextId++)
      }], 5_000)
      await sleep(300)
      const answers = parseAnswers(out.response)
      t.same(answers.map((a) => a.status), [400], 'one 400, nothing after it')
      t.match(JSON.parse(answers[0]?.body ?? '{}'), { error: 400, message: /Authorization/ }, 'naming the header, in the Error shape')
      t.notOk(answers[0]?.headers['www-authenticate'], 'not an authentication failure: the request is malformed')
      t.equal(answers[0]?.headers.connection, 'close', 'with Connection: close')
      t.ok(out.closedByServer, 'then the connection ended')
      t.notOk(await stored(server, id), 'the create was not stored')
      t.notOk(await stored(server, id + 1), 'nor the one behind it')
    })
  }
})
