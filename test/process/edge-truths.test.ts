import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { createTestDatabase, forEachBackend, TOKEN } from '../helper.js'
import { answeredStatuses, parseAnswers, rawExchange, request } from '../support/http.js'
import { startServerProcess, type SourceServer } from '../support/processes.js'
import { untilReady } from '../support/big-creates.js'

// What the edge tells the truth about, over real sockets to a real process:
// a URL that does not decode is answered like every other closing answer; a
// header that may appear once (Authorization) sent twice is refused before
// auth; and what a client puts in a query string never comes back in a
// message or goes into the log.

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
    env: { LOG_LEVEL: 'debug' },
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

  await t.test('a token in the query string is never echoed nor logged', async (t) => {
    const secret = 'query-secret-5e0d7b'
    const query = `?access_token=${secret}&x=1`
    const requests: Array<[string, string, number]> = [
      ['an unknown path', `GET /nowhere${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`, 404],
      ['an unknown path with a body', `POST /nowhere${query} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}`, 404],
      ['a wrong method', `DELETE /plants${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`, 405],
      ['a path that does not decode', `GET /%zz${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`, 400],
      ['an API path that does not decode', `POST /plants%zz${query} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}`, 400],
      ['a create', create(nextId++).replace('POST /plants ', `POST /plants${query} `), 200],
      ['no token', `POST /plants${query} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}`, 401],
      ['a probe', `GET /health/live${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`, 200],
      ['HTTP/2.0', `GET /nowhere${query} HTTP/2.0\r\nHost: localhost\r\n\r\n`, 505],
      ['a header Node refuses', `GET /nowhere${query} HTTP/1.1\r\nHost: localhost\r\nBad Header: x\r\n\r\n`, 400],
      ['CONNECT', `CONNECT /nowhere${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`, 400]
    ]
    for (const [what, data, status] of requests) {
      // Connection: close, so that every exchange ends with its answer.
      const out = await rawExchange(port, [{ data: data.replace('\r\n', '\r\nConnection: close\r\n') }], 5_000)
      t.same(answeredStatuses(out.response), [status], `${what}: ${status}`)
      t.notMatch(out.response, secret, `${what}: the query is not in the answer`)
    }
    await sleep(500)
    const leaking = server.logs.filter((line) => JSON.stringify(line).includes(secret))
    t.same(leaking, [], 'no log line holds the query')
    t.ok(server.logs.some((line) => line.status === 404 && line.msg === 'request'), 'the requests were logged')
  })
})
