import t from 'tap'
import { connect } from 'node:net'
import Fastify from 'fastify'
import { buildStubApp, assertErrorShape, auth, jsonHeaders, TOKEN } from '../helper.js'
import { parseRawResponse, rawExchange } from '../support/http.js'
import { errorHandler } from '../../plugins/error-answers.js'
import { OutcomeUnknownError, StoreUnavailableError } from '../../src/store/store-errors.js'
import { HttpError } from '../../src/http-error.js'

// The error handler on its own: what reaches the client for each kind of error.
t.test('error handler', async (t) => {
  const logged: string[] = []
  const app = Fastify({ logger: { level: 'trace', stream: { write: (line: string) => { logged.push(line) } } } })
  app.setErrorHandler(errorHandler)
  app.get('/crash', async () => { throw new Error('secret detail: SELECT * FROM plants at /srv/app.js:1') })
  app.get('/db-down', async () => { throw new StoreUnavailableError('connect ECONNREFUSED 10.0.0.1:5432') })
  app.get('/unconfirmed', async () => { throw new OutcomeUnknownError('the write was sent and not confirmed', { cause: new Error('Query read timeout') }) })
  app.get('/conflict', async () => { throw new HttpError(409, 'A different plant is already stored with id 1') })
  app.get('/odd-status', async () => { throw Object.assign(new Error('weird'), { statusCode: 302 }) })
  t.teardown(() => app.close())

  const crash = await app.inject('/crash')
  const body = assertErrorShape(t, crash, 500)
  t.equal(body.message, 'Internal Server Error', 'a generic message')
  t.notMatch(crash.body, /secret|SELECT|app\.js/, 'no internals in the response')
  t.ok(logged.some((l) => l.includes('secret detail') && l.includes('"reqId"')), 'details logged with the request id')

  const down = await app.inject('/db-down')
  assertErrorShape(t, down, 503)
  t.equal(down.headers['retry-after'], '5')
  t.notMatch(down.body, /ECONNREFUSED|10\.0\.0\.1/)

  const unknown = await app.inject('/unconfirmed')
  t.match(assertErrorShape(t, unknown, 504).message, /outcome unknown; replaying this create tells/)
  t.equal(unknown.headers['retry-after'], '5')
  t.ok(logged.some((l) => l.includes('"level":40') && l.includes('outcome unknown') && l.includes('"reqId"')), 'a warn line with the request id')

  const conflict = await app.inject('/conflict')
  t.equal(assertErrorShape(t, conflict, 409).message, 'A different plant is already stored with id 1')

  assertErrorShape(t, await app.inject('/odd-status'), 500)
})

t.test('errors from routing and HTTP', async (t) => {
  const { app } = await buildStubApp(t)

  t.test('unknown routes answer 404, with or without a token', async (t) => {
    assertErrorShape(t, await app.inject('/nope'), 404)
    assertErrorShape(t, await app.inject({ url: '/nope', headers: auth() }), 404)
    assertErrorShape(t, await app.inject({ method: 'POST', url: '/plants/1', headers: jsonHeaders(), payload: '{}' }), 404)
  })

  t.test('a wrong method on /plants answers 405 with Allow: POST in the Error shape', async (t) => {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const) {
      const res = await app.inject({ method, url: '/plants', headers: auth() })
      assertErrorShape(t, res, 405)
      t.equal(res.headers.allow, 'POST', method)
    }
  })

  t.test('malformed HTTP gets the Error shape while the connection allows it', async (t) => {
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write('THIS IS NOT HTTP\r\n\r\n'))
      let data = ''
      socket.on('data', (chunk) => { data += chunk.toString() })
      socket.on('end', () => resolve(data))
      socket.on('error', reject)
    })
    t.match(answer, /^HTTP\/1\.1 400 Bad Request\r\n/)
    t.match(answer, /content-type: application\/json/i)
    t.same(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)), { error: 400, message: 'Bad Request' })
    t.match(answer, /\r\nx-request-id: [\w-]{36}\r\n/i, 'with a request id')

    // What Node or Fastify would otherwise answer on their own, outside
    // the Error shape: a URL that does not decode, HTTP/1.1 without Host,
    // an Expect other than 100-continue.
    const cases: Array<[string, string, number]> = [
      ['a URL that does not percent-decode', `POST /plants%ZZ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, 400],
      ['an HTTP/1.1 request without Host', 'GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n', 400],
      ['an Expect other than 100-continue', `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}`, 417]
    ]
    for (const [what, raw, status] of cases) {
      const res = parseRawResponse((await rawExchange(port, [{ data: raw }], 5000)).response)
      t.ok(res !== undefined, `${what}: an answer`)
      if (res === undefined) continue
      assertErrorShape(t, { statusCode: res.status, headers: res.headers, body: res.body }, status)
      t.match(res.headers['x-request-id'], /^[\w.:-]{1,128}$/, `${what}: a request id`)
    }
    const http10 = parseRawResponse((await rawExchange(port, [{ data: 'GET /health/live HTTP/1.0\r\n\r\n' }], 5000)).response)
    t.equal(http10?.status, 200, 'HTTP/1.0 needs no Host')
  })
})
