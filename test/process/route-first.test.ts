import t from 'tap'
import { assertErrorShape, listeningStubApp, TOKEN } from '../helper.js'
import { parseRawResponse, rawExchange, type Chunk } from '../support/http.js'

// Routing comes first: an unknown path answers 404 and a method other than
// POST on /plants 405 with Allow: POST, with or without a token, without
// reading or parsing the body. A body that never finishes still gets its
// answer at once (so the parser never ran), and the connection closes
// because the body was left unread.
const TIMEOUTS = { requestTimeoutMs: 20_000 }
const IMMEDIATE_MS = 5000

t.test('routing before authentication and the body', async (t) => {
  // Answers at the edge, no row read: the app runs over the stub store.
  const { port } = await listeningStubApp(t, { timeouts: TIMEOUTS })

  const send = async (method: string, path: string, opts: { token?: boolean, unfinished?: boolean } = {}) => {
    const head = [`${method} ${path} HTTP/1.1`, 'Host: localhost', 'Content-Type: application/json',
      ...(opts.token === true ? [`Authorization: Bearer ${TOKEN}`] : [])]
    const chunks: Chunk[] = opts.unfinished === true
      // A 1 MB body that stops after 10 bytes.
      ? [{ data: `${[...head, 'Content-Length: 1000000'].join('\r\n')}\r\n\r\n{"id": 1, ` }]
      // A broken JSON body, complete.
      : [{ data: `${[...head, 'Content-Length: 9', 'Connection: close'].join('\r\n')}\r\n\r\n{"id": 1,` }]
    return await rawExchange(port, chunks, TIMEOUTS.requestTimeoutMs + 5000)
  }

  for (const method of ['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
    for (const token of [false, true]) {
      await t.test(`${method} /plants ${token ? 'with' : 'without'} a token and a broken body: 405, Allow: POST`, async (t) => {
        const out = await send(method, '/plants', { token })
        const res = parseRawResponse(out.response)
        t.equal(res?.status, 405)
        t.equal(res?.headers.allow, 'POST')
        if (res !== undefined && method !== 'HEAD') assertErrorShape(t, { statusCode: res.status, headers: res.headers, body: res.body }, 405)
      })
    }
  }

  for (const [method, path] of [['PUT', '/anything'], ['POST', '/plants/1'], ['DELETE', '/nope']]) {
    await t.test(`${method} ${path} with a broken body: 404`, async (t) => {
      for (const token of [false, true]) {
        const res = parseRawResponse((await send(method as string, path as string, { token })).response)
        if (res === undefined) {
          t.fail('an answer')
          continue
        }
        assertErrorShape(t, { statusCode: res.status, headers: res.headers, body: res.body }, 404)
      }
    })
  }

  for (const [method, path, status] of [['PUT', '/anything', 404], ['DELETE', '/plants', 405], ['GET', '/plants', 405]] as const) {
    await t.test(`${method} ${path} with a body that never finishes: ${status} at once, connection closed`, async (t) => {
      const out = await send(method, path, { token: true, unfinished: true })
      const res = parseRawResponse(out.response)
      t.equal(res?.status, status, `${status}, so the body was never waited for, let alone parsed`)
      t.ok(out.elapsedMs < IMMEDIATE_MS, `answered and closed after ${out.elapsedMs} ms (request timeout ${TIMEOUTS.requestTimeoutMs} ms)`)
      t.equal(res?.headers.connection, 'close', 'Connection: close: the body was left unread')
      t.ok(out.closedByServer, 'the server closed the connection')
    })
  }
})
