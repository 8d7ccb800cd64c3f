import t from 'tap'
import { readFileSync } from 'node:fs'
import { Writable } from 'node:stream'
import { testConfig, jsonHeaders, TOKEN, OTHER_TOKEN, type Teardown } from '../helper.js'
import { stubStore } from '../support/stub-store.js'
import { request, type HttpAnswer } from '../support/http.js'
import { metricsUrlOf, parseSamples, valueOf } from '../support/prometheus.js'
import { buildApp } from '../../app.js'
import { root } from '../support/processes.js'
import { startJwtApp } from '../support/jwt-app.js'
import { signingKey, signToken, startKeySet } from '../support/token-issuer.js'

// RATE_LIMIT_PER_MINUTE over real sockets: per token, after auth, 429 in the
// Error shape with Retry-After, counted in the metrics.

const LIMIT = 3

async function start (t: Teardown, overrides: Parameters<typeof testConfig>[1] = {}) {
  const logs: string[] = []
  const stream = new Writable({ write (chunk, _encoding, done) { logs.push(String(chunk)); done() } })
  // The limit counts answers, whatever the database: the app runs over the stub store.
  const config = testConfig({ kind: 'pglite', dataDir: 'memory://' }, { rateLimitPerMinute: LIMIT, metricsPort: 0, ...overrides })
  const app = await buildApp({ config, logger: { level: 'debug', stream }, store: stubStore() })
  t.teardown(() => app.close())
  const apiUrl = await app.listen({ port: 0, host: '127.0.0.1' })
  return { apiUrl, logs, metricsUrl: metricsUrlOf(logs) }
}

let nextId = 1
const create = async (apiUrl: string, headers: Record<string, string> = jsonHeaders()): Promise<HttpAnswer> =>
  await request(`${apiUrl}/plants`, { method: 'POST', headers, body: JSON.stringify({ id: nextId++, name: 'Fern' }) })

t.test('past the limit: 429 with Retry-After in the Error shape, per token', async (t) => {
  const { apiUrl, logs, metricsUrl } = await start(t)
  // Unauthenticated requests count against nobody.
  for (let i = 0; i < LIMIT + 2; i++) t.equal((await create(apiUrl, { ...jsonHeaders(), authorization: 'Bearer not-a-token' })).status, 401)
  // Nor do creates of another media type.
  for (let i = 0; i < LIMIT + 2; i++) t.equal((await create(apiUrl, { ...jsonHeaders(), 'content-type': 'text/plain' })).status, 415)
  for (let i = 0; i < LIMIT; i++) t.equal((await create(apiUrl)).status, 200, `create ${i + 1} of ${LIMIT}`)

  const refused = await create(apiUrl)
  t.equal(refused.status, 429)
  t.match(refused.headers['content-type'], /^application\/json/)
  const body = JSON.parse(refused.body) as Record<string, unknown>
  t.same(Object.keys(body).sort(), ['error', 'message'], 'exactly error and message')
  t.equal(body.error, 429)
  t.match(body.message, /this caller may make 3 a minute/)
  const retryAfter = Number(refused.headers['retry-after'])
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${String(refused.headers['retry-after'])} is 1-60 seconds`)
  t.equal(refused.headers.connection, 'close', 'answered before the body was read')
  t.ok(refused.headers['x-request-id'], 'with the request id')

  // The same token written another way (the scheme's case, more spaces) shares its window.
  for (const spelling of [`bearer ${TOKEN}`, `BEARER   ${TOKEN}`]) {
    const res = await create(apiUrl, { ...jsonHeaders(), authorization: spelling })
    t.equal(res.status, 429, `same token, spelled ${JSON.stringify(spelling.replace(TOKEN, 'TOKEN'))}`)
  }
  // Another token has a minute of its own.
  for (let i = 0; i < LIMIT; i++) t.equal((await create(apiUrl, jsonHeaders(OTHER_TOKEN))).status, 200, `other token ${i + 1}`)
  t.equal((await create(apiUrl, jsonHeaders(OTHER_TOKEN))).status, 429, 'and its own limit')

  const samples = parseSamples((await request(metricsUrl)).body)
  t.equal(valueOf(samples, 'http_request_duration_seconds_count', { method: 'POST', route: '/plants', status_code: '429' }), 4, 'the 429s are counted')
  t.equal(valueOf(samples, 'plant_store_creates_total', { outcome: 'created' }), 2 * LIMIT, 'the refused creates never reached the store')
  t.notOk(logs.some((line) => line.includes(TOKEN) || line.includes(OTHER_TOKEN)), 'no token in the log')
})

t.test('without RATE_LIMIT_PER_MINUTE there is no limit', async (t) => {
  const { apiUrl } = await start(t, { rateLimitPerMinute: undefined })
  for (let i = 0; i < 20; i++) {
    const res = await create(apiUrl)
    if (res.status !== 200) t.fail(`create ${i + 1} answered ${res.status}`)
  }
  t.pass('20 creates in a row answered 200')
})

t.test('with a limit, the served document lists 429 on POST /plants with Retry-After; without, it does not', async (t) => {
  const { apiUrl } = await start(t)
  const doc = JSON.parse((await request(`${apiUrl}/openapi.json`)).body)
  const answer = doc.paths['/plants'].post.responses['429']
  t.ok(answer, '429 is documented')
  t.same(answer.content['application/json'].schema, { $ref: '#/components/schemas/Error' })
  t.equal(answer.content['application/json'].example.error, 429)
  t.same(answer.headers['Retry-After'], { $ref: '#/components/headers/Retry-After' })
  const committed = JSON.parse(readFileSync(`${root}/openapi.json`, 'utf8'))
  t.notOk(committed.paths['/plants'].post.responses['429'], 'the committed document (no limit configured) has no 429')
})

t.test('JWT clients past AUTH_MAX_CLIENTS never take a configured caller\'s window', async (t) => {
  const key = await signingKey('key-a', 'ES256')
  const keys = await startKeySet(t, key)
  const maxClients = 100
  const app = await startJwtApp(t, 'stub', { issuer: keys.issuer, jwksUrl: keys.url, maxClients }, { rateLimitPerMinute: 2 })
  t.same([(await app.create(TOKEN)).status, (await app.create(TOKEN)).status, (await app.create(TOKEN)).status], [200, 200, 429], 'the static token: two creates, then 429')
  // One create each for half as many clients again as the bound, 8 at a time.
  const clients = Array.from({ length: maxClients * 1.5 }, (_, i) => `client-${i}`)
  const counts = new Map<number, number>()
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let id = clients.shift(); id !== undefined; id = clients.shift()) {
      const status = (await app.create(await signToken(key, keys.issuer, { client_id: id, sub: id }))).status
      counts.set(status, (counts.get(status) ?? 0) + 1)
    }
  }))
  t.same(Object.fromEntries(counts), { 200: maxClients * 1.5 }, 'every JWT client created once')
  const after = [(await app.create(TOKEN)).status, (await app.create(TOKEN)).status]
  t.comment(`the static token after ${maxClients * 1.5} JWT clients: ${after.join(', ')}`)
  t.same(after, [429, 429], 'the static token is still limited in the same minute')
})
