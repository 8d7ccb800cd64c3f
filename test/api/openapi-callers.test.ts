import t from 'tap'
import { assertErrorShape, buildStubApp, jsonHeaders, postPlant } from '../helper.js'
import { StoreUnavailableError } from '../../src/store/store-errors.js'
import { RETRY_AFTER_SECONDS } from '../../src/http-error.js'
import { ISSUER_RETRY_MAX_SECONDS } from '../../src/jwt-verification.js'

// What a caller (or a client generator) needs from the served document:
// servers, response headers per status, an Error example per status, which
// answers are safe to retry, and the int64 caveat for JavaScript. Where the
// service can be made to give an answer here, the real answer is checked to
// carry what the document promises. The answers do not depend on the
// database behind the store, so the app runs over the stub store; a real
// database closed under the app answers 503 in test/api/health.test.ts.

type Json = Record<string, any>

const HEADERS = '#/components/headers/'

t.test('the document for callers', async (t) => {
  const { app, store } = await buildStubApp(t)
  const doc = JSON.parse((await app.inject({ method: 'GET', url: '/openapi.json' })).body) as Json
  const post = doc.paths['/plants'].post as Json
  const responses = post.responses as Record<string, Json>
  const headerNames = (status: string): string[] => Object.keys(responses[status]?.headers ?? {}).sort()

  t.test('servers: this service (relative), then an absolute address with the default HOST and PORT', async (t) => {
    t.same(doc.servers[0], { url: '/', description: doc.servers[0].description })
    t.equal(doc.servers[1].url, 'http://{host}:{port}')
    t.same(doc.servers[1].variables.host.default, '127.0.0.1')
    t.same(doc.servers[1].variables.port.default, '3000')
    t.equal(doc.servers.length, 2)
  })

  t.test('headers: X-Request-Id on every answer, and each status its own', async (t) => {
    const own: Record<string, string[]> = { 401: ['WWW-Authenticate'], 403: ['WWW-Authenticate'], 429: ['Retry-After'], 503: ['Retry-After'], 504: ['Retry-After'] }
    for (const status of Object.keys(responses)) {
      t.same(headerNames(status), ['X-Request-Id', ...(own[status] ?? [])].sort(), `${status} headers`)
      for (const [name, header] of Object.entries(responses[status]?.headers as Json)) {
        t.same(header, { $ref: `${HEADERS}${name}` }, `${status} ${name} points at its component`)
      }
    }
    for (const [name, header] of Object.entries(doc.components.headers as Json)) {
      t.ok(header.description.length > 20, `${name} is described`)
      t.ok(header.schema.type, `${name} has a schema`)
    }
    t.equal(doc.components.headers['Retry-After'].schema.type, 'integer', 'Retry-After is seconds')
    t.match(doc.components.headers['WWW-Authenticate'].description, 'Bearer realm="plant-store"')
    for (const part of ['invalid_token', 'error_description', 'insufficient_scope', 'scope=']) {
      t.match(doc.components.headers['WWW-Authenticate'].description, part, `WWW-Authenticate describes ${part}`)
    }
  })

  t.test('X-Request-Id is an optional request header', async (t) => {
    t.same(post.parameters.map((p: Json) => [p.name, p.in, p.required]), [['X-Request-Id', 'header', false], ['traceparent', 'header', false]])
  })

  t.test('examples: a Plant for 200, and for each error the Error whose error is the status', async (t) => {
    t.same(responses['200']?.content['application/json'].example, { name: 'Monstera', tag: 'indoor' })
    for (const [status, response] of Object.entries(responses)) {
      if (status === '200') continue
      const example = response.content['application/json'].example
      t.same(Object.keys(example).sort(), ['error', 'message'], `${status}: an Error`)
      t.equal(example.error, Number(status), `${status}: error equals the status`)
      t.ok(typeof example.message === 'string' && example.message.length > 0, `${status}: a message`)
    }
  })

  t.test('retry safety: the operation and every answer say whether retrying is safe', async (t) => {
    t.match(post.description, /safe to retry/i)
    t.match(post.description, /idempotent/i)
    for (const [status, response] of Object.entries(responses)) {
      t.match(response.description, /retry|again/i, `${status} says whether to retry`)
    }
    t.match(responses['503']?.description, /safe to retry after the Retry-After/i)
    t.match(responses['504']?.description, /outcome is unknown.*Replay the same request/is)
    t.match(responses['409']?.description, /retrying answers 409 again/i)
    t.match(responses['400']?.description, /do not retry unchanged/i)
  })

  t.test('the statuses POST /plants can answer in this configuration, and no other', async (t) => {
    t.same(Object.keys(responses).sort(), ['200', '400', '401', '408', '409', '413', '415', '500', '501', '503', '504'])
  })

  t.test('the id says how JavaScript callers keep it exact', async (t) => {
    const id = doc.components.schemas.NewPlant.properties.id
    t.same([id.type, id.format], ['integer', 'int64'])
    t.match(id.description, /bare JSON number/)
    t.match(id.description, /2\^53-1 \(9007199254740991\)/)
    t.match(id.description, /client/)
    t.match(id.description, /JSON\.rawJSON/)
  })

  t.test('the Authorize text says what a token is and where to get one', async (t) => {
    const text = doc.components.securitySchemes.bearerAuth.description as string
    t.match(text, /team that runs the plant store/)
    t.match(text, /start-up/)
    t.notMatch(text, /API_TOKENS/, 'no server-side setting names')
  })

  t.test('real answers carry what the document promises', async (t) => {
    const answers: Record<string, Awaited<ReturnType<typeof postPlant>>> = {
      200: await postPlant(app, '{"id": 1, "name": "Monstera"}'),
      400: await postPlant(app, '{"id": "1", "name": "Monstera"}'),
      401: await postPlant(app, '{"id": 1, "name": "Monstera"}', { 'content-type': 'application/json', authorization: 'Bearer wrong' }),
      409: await postPlant(app, '{"id": 1, "name": "Ficus"}'),
      413: await postPlant(app, JSON.stringify({ id: 2, name: 'x'.repeat(1_100_000) })),
      415: await postPlant(app, '{"id": 1, "name": "Monstera"}', { ...jsonHeaders(), 'content-type': 'text/plain' }),
      501: await postPlant(app, '{"id": 4, "name": "Monstera"}', { ...jsonHeaders(), 'transfer-encoding': 'gzip, chunked' })
    }
    store.answer = async () => { throw new StoreUnavailableError('The database is unavailable') }
    answers[503] = await postPlant(app, '{"id": 3, "name": "Monstera"}')
    for (const [status, res] of Object.entries(answers)) {
      t.equal(res.statusCode, Number(status), `${status} answered`)
      if (status !== '200') assertErrorShape(t, res, Number(status))
      for (const name of headerNames(status)) {
        t.ok(res.headers[name.toLowerCase()], `${status} carries ${name}`)
      }
    }
    t.equal(answers[503]?.headers['retry-after'], '5')
  })
})

t.test('Swagger UI and the root address', async (t) => {
  const { app } = await buildStubApp(t)

  t.test('the page is titled "Plant store API"', async (t) => {
    const page = await app.inject({ method: 'GET', url: '/docs' })
    t.match(page.body, /<title>Plant store API<\/title>/)
  })

  t.test('the page loads and links /openapi.json', async (t) => {
    const script = (await app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' })).body
    t.match(script, /new URL\("\.\.\/openapi\.json",\s*url\)/, 'the document URL is rewritten to /openapi.json')
    t.notMatch(script, /__name\(/, 'no helper the browser lacks')
    t.match(script, /SwaggerUIBundle\.plugins\.DownloadUrl/, 'Swagger UI still downloads the document')
  })

  t.test('GET / redirects to /docs, without a token', async (t) => {
    const res = await app.inject({ method: 'GET', url: '/' })
    t.equal(res.statusCode, 302)
    t.equal(res.headers.location, '/docs')
    t.ok(res.headers['x-request-id'])
  })
})

// Issue 46's document items: each checked on the document a running configuration serves.
t.test('the document bounds what it promises and says what the service does', async (t) => {
  const served = async (overrides: Parameters<typeof buildStubApp>[1] = {}): Promise<Json> => {
    const { app } = await buildStubApp(t, overrides)
    return JSON.parse((await app.inject({ method: 'GET', url: '/openapi.json' })).body) as Json
  }
  const doc = await served()
  const post = doc.paths['/plants'].post as Json

  t.test('the 409 says what happened once, and asks nothing a caller cannot do', async (t) => {
    const text = post.responses['409'].description as string
    t.notMatch(text, /send the stored plant/i)
    t.ok((text.match(/nothing (was|is) (changed|overwritten)/gi) ?? []).length <= 1, `said once: ${text}`)
    const sentences = text.split(/(?<=\.) /)
    t.equal(new Set(sentences).size, sentences.length, 'no sentence twice')
  })

  t.test('Error.error is an HTTP error status: int32, 400 to 599', async (t) => {
    t.match(doc.components.schemas.Error.properties.error, { type: 'integer', format: 'int32', minimum: 400, maximum: 599 })
  })

  t.test('X-Request-Id answers follow the documented pattern, the one the service checks a caller\'s id by', async (t) => {
    const parameter = post.parameters.find((p: Json) => p.name === 'X-Request-Id')
    const pattern = doc.components.headers['X-Request-Id'].schema.pattern as string
    t.equal(pattern, parameter.schema.pattern, 'the request header\'s pattern')
    const { app } = await buildStubApp(t)
    for (const id of ['abc-1.2:3_4', 'a'.repeat(128), 'a'.repeat(129), 'no spaces', 'ünïcode', '']) {
      const res = await app.inject({ method: 'GET', url: '/health/live', headers: { 'x-request-id': id } })
      const answered = res.headers['x-request-id'] as string
      t.match(answered, new RegExp(pattern), `answered ${answered}`)
      t.equal(answered === id, new RegExp(pattern).test(id), `${JSON.stringify(id.slice(0, 20))} kept exactly when the pattern allows it`)
    }
  })

  t.test('traceparent is declared as an optional request header', async (t) => {
    const traceparent = post.parameters.find((p: Json) => p.name === 'traceparent')
    t.match(traceparent, { in: 'header', required: false, schema: { type: 'string' } })
    t.match(traceparent.description, /W3C Trace Context/)
  })

  t.test('Retry-After is whole seconds, int32, at most the largest value the service sends', async (t) => {
    const schema = doc.components.headers['Retry-After'].schema
    t.match(schema, { type: 'integer', format: 'int32', minimum: 1 })
    const { app } = await buildStubApp(t, { rateLimitPerMinute: 1 })
    await postPlant(app, '{"id": 1, "name": "Monstera"}')
    const limited = await postPlant(app, '{"id": 2, "name": "Monstera"}')
    t.equal(limited.statusCode, 429)
    t.equal(schema.maximum, Number(limited.headers['retry-after']), 'a fresh minute\'s 429 waits the longest')
    for (const seconds of [...Object.values(RETRY_AFTER_SECONDS), ISSUER_RETRY_MAX_SECONDS]) t.ok(seconds <= schema.maximum, `${seconds} s`)
  })

  t.test('the 429 example says the configured limit', async (t) => {
    const limited = await served({ rateLimitPerMinute: 7 })
    const example = limited.paths['/plants'].post.responses['429'].content['application/json'].example
    t.match(example.message, /\b7 a minute/)
    const { app } = await buildStubApp(t, { rateLimitPerMinute: 1 })
    await postPlant(app, '{"id": 1, "name": "Monstera"}')
    const real = JSON.parse((await postPlant(app, '{"id": 2, "name": "Monstera"}')).body)
    t.equal(real.message, example.message.replace('7 a minute', '1 a minute'), 'worded as the real answer')
  })

  t.test('with JWT access tokens, the scheme says it follows RFC 8725', async (t) => {
    const withIssuer = await served({ auth: { issuer: 'http://127.0.0.1:9/', tokenUrl: 'http://127.0.0.1:9/token', audience: 'plant-store', requiredScope: 'plants:write', clockSkewS: 30, maxClients: 10 } })
    t.match(withIssuer.components.securitySchemes.oauth2.description, /RFC 8725/)
    t.match(withIssuer.components.securitySchemes.oauth2.description, /RFC 9068/)
  })
})
