import t from 'tap'
import { listeningStubApp, TOKEN } from '../helper.js'
import { parseRawResponse, rawExchange, request } from '../support/http.js'

// Expect: 100-continue is granted only once authentication and the media
// type passed, and every answer, whoever gives it, carries
// X-Content-Type-Options: nosniff.
const TIMEOUTS = { headersTimeoutMs: 1000, requestTimeoutMs: 2000, checkIntervalMs: 200 }

t.test('answers at the edge', async (t) => {
  // Answers at the edge, no row read: the app runs over the stub store.
  const { port } = await listeningStubApp(t, { timeouts: TIMEOUTS })
  const base = `http://127.0.0.1:${port}`

  const expectHead = (lines: string[]): string => `${['POST /plants HTTP/1.1', 'Host: localhost', 'Expect: 100-continue', ...lines].join('\r\n')}\r\n\r\n`

  await t.test('Expect: 100-continue with a wrong token: 401, never 100 Continue', async (t) => {
    const out = await rawExchange(port, [{ data: expectHead(['Authorization: Bearer wrong', 'Content-Type: application/json', 'Content-Length: 30']) }], 5000)
    t.notMatch(out.response, /100 Continue/, 'no 100 Continue')
    t.equal(parseRawResponse(out.response)?.status, 401)
  })

  await t.test('Expect: 100-continue with the wrong media type: 415, never 100 Continue', async (t) => {
    const out = await rawExchange(port, [{ data: expectHead([`Authorization: Bearer ${TOKEN}`, 'Content-Type: text/plain', 'Content-Length: 30']) }], 5000)
    t.notMatch(out.response, /100 Continue/, 'no 100 Continue')
    t.equal(parseRawResponse(out.response)?.status, 415)
  })

  await t.test('Expect: 100-continue on an unknown route: 404, never 100 Continue', async (t) => {
    const out = await rawExchange(port, [{ data: expectHead(['Content-Type: application/json', 'Content-Length: 30']).replace('/plants', '/nope') }], 5000)
    t.notMatch(out.response, /100 Continue/, 'no 100 Continue')
    t.equal(parseRawResponse(out.response)?.status, 404)
  })

  await t.test('Expect: 100-continue, authorised JSON: 100 Continue, then the body, then 200', async (t) => {
    const body = '{"id": 6001, "name": "continued"}'
    const out = await rawExchange(port, [
      { data: expectHead([`Authorization: Bearer ${TOKEN}`, 'Content-Type: application/json', `Content-Length: ${body.length}`, 'Connection: close']) },
      { delayMs: 500, data: body }
    ], 5000, true)
    t.match(out.response, /^HTTP\/1\.1 100 Continue\r\n\r\n/, '100 Continue first')
    t.equal(parseRawResponse(out.response.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, ''))?.status, 200)
  })

  await t.test('every answer carries X-Content-Type-Options: nosniff', async (t) => {
    const viaFastify: Array<[string, Parameters<typeof request>[1], number]> = [
      ['/plants', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: '{"id": 6002, "name": "n"}' }, 200],
      ['/plants', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }, 401],
      ['/plants', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: '{' }, 400],
      ['/nope', { method: 'GET' }, 404],
      ['/plants', { method: 'GET' }, 405],
      ['/health/live', { method: 'GET' }, 200],
      ['/openapi.json', { method: 'GET' }, 200]
    ]
    for (const [path, opts, status] of viaFastify) {
      const res = await request(`${base}${path}`, opts)
      t.equal(res.status, status, `${opts?.method ?? 'GET'} ${path}: ${status}`)
      t.equal(res.headers['x-content-type-options'], 'nosniff', `${opts?.method ?? 'GET'} ${path}: nosniff`)
    }
    const raw: Array<[string, string, number]> = [
      ['malformed HTTP', 'THIS IS NOT HTTP\r\n\r\n', 400],
      ['a URL that does not decode', 'GET /plants%ZZ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 400],
      ['an unmet Expect', `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}`, 417],
      ['oversized headers', `GET /health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
      ['a slow client', 'GET /health/live HTTP/1.1\r\nHost: x\r\n', 408]
    ]
    for (const [what, data, status] of raw) {
      const res = parseRawResponse((await rawExchange(port, [{ data }], 5000)).response)
      t.equal(res?.status, status, `${what}: ${status}`)
      t.equal(res?.headers['x-content-type-options'], 'nosniff', `${what}: nosniff`)
    }
  })
})
