import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { TOKEN } from '../helper.js'
import { KEYS_COOLDOWN_MS as COOLDOWN_MS, KEYS_TIMEOUT_MS as TIMEOUT_MS, startJwtApp, startWithKeySet as setUp } from '../support/jwt-app.js'
import { signingKey, signToken, startKeySet } from '../support/token-issuer.js'

// The issuer's key set as the service keeps it, over real HTTP: fetched
// from AUTH_JWKS_URL, refetched for an unknown kid at most once per
// cooldown, the last good set kept, 503 when the issuer does not answer;
// verified tokens remembered until they expire. Its bounds are in
// jwt-key-bounds.test.ts.

const EXPIRED = 'Bearer realm="plant-store", error="invalid_token", error_description="The access token expired"'

t.test('an unknown kid refetches the key set at most once per cooldown', async (t) => {
  const { keys, app, sign } = await setUp(t)
  t.equal((await app.create(await sign())).status, 200, 'a token of a published key: 200, no fetch')
  t.equal(keys.fetches(), 1)
  const strangers = await Promise.all(Array.from({ length: 10 }, async (_, i) => await sign(await signingKey(`unknown-${i}`))))
  await sleep(COOLDOWN_MS + 100)
  const statuses = await Promise.all(strangers.map(async (token) => (await app.create(token)).status))
  t.same(statuses, Array(10).fill(401), '10 unknown kids at once: 401')
  t.equal(keys.fetches(), 2, '10 unknown kids within the cooldown: one fetch')
  for (const token of strangers) t.equal((await app.create(token)).status, 401)
  t.equal(keys.fetches(), 2, 'and again, no fetch')
  await sleep(COOLDOWN_MS + 100)
  t.equal((await app.create(await sign(await signingKey('unknown-later')))).status, 401)
  t.equal(keys.fetches(), 3, 'after the cooldown, one more')
})

t.test('malformed and oversized tokens never fetch the key set', async (t) => {
  const { keys, app } = await setUp(t)
  await sleep(COOLDOWN_MS + 100)
  const stranger = await signingKey('never-fetched')
  const big = await signToken(stranger, keys.issuer, { padding: 'x'.repeat(9000) })
  const tokens = ['not-a-jwt', 'a.b.c', 'e30.e30.', `${'A'.repeat(20)}.${'B'.repeat(20)}.${'C'.repeat(20)}`, big,
    await signToken(stranger, 'http://127.0.0.1:1/another-issuer'), await signToken(stranger, keys.issuer, {}, { typ: 'JWT' }),
    await signToken(stranger, keys.issuer, {}, { alg: 'HS256' }).catch(() => 'eyJhbGciOiJIUzI1NiJ9.e30.x')]
  for (const token of tokens) t.equal((await app.create(token)).status, 401, `${token.slice(0, 20)}…: 401`)
  t.equal(keys.fetches(), 1, 'no fetch')
})

t.test('key rotation: an old kid works while published and fails once removed', async (t) => {
  const { a, keys, app, sign } = await setUp(t)
  const b = await signingKey('key-b')
  const remembered = await sign(a)
  t.equal((await app.create(remembered)).status, 200, 'key A')
  keys.publish(a, b)
  await sleep(COOLDOWN_MS + 100)
  t.equal((await app.create(await sign(b))).status, 200, 'key B, newly published: fetched')
  t.equal((await app.create(await sign(a))).status, 200, 'key A, still published')
  keys.publish(b)
  await sleep(COOLDOWN_MS + 100)
  // An unknown kid makes the service learn the new set.
  t.equal((await app.create(await sign(await signingKey('key-c')))).status, 401)
  t.equal(keys.fetches(), 3)
  t.equal((await app.create(await sign(a))).status, 401, 'a new token of removed key A: 401')
  t.equal((await app.create(await sign(b))).status, 200, 'key B: 200')
  t.equal((await app.create(remembered)).status, 200, 'a token verified before is remembered (no signature check) until it expires')
})

t.test('an issuer that never answers: 503 within the fetch timeout, known keys keep working', async (t) => {
  const { keys, app, sign } = await setUp(t)
  keys.hang(true)
  await sleep(COOLDOWN_MS + 100)
  const started = Date.now()
  const res = await app.create(await sign(await signingKey('key-new')))
  const took = Date.now() - started
  t.equal(res.status, 503, res.body)
  const retryAfter = Number(res.headers['retry-after'])
  t.ok(retryAfter >= 1 && retryAfter <= Math.ceil(COOLDOWN_MS / 1000), `Retry-After ${String(res.headers['retry-after'])}: the rest of the cooldown`)
  t.ok(took >= TIMEOUT_MS - 100 && took < TIMEOUT_MS + 3000, `answered after the ${TIMEOUT_MS} ms fetch timeout (${took} ms)`)
  t.equal((await app.create(await sign())).status, 200, 'a new token of a known key: 200 meanwhile')
  t.equal((await app.create(TOKEN)).status, 200, 'static tokens: 200')
  t.ok(app.logs.some((l) => l.includes('no key from the token issuer')), 'logged')
})

t.test('an issuer down at start-up: the service starts, static tokens work, JWTs answer 503', async (t) => {
  const a = await signingKey('key-a')
  const keys = await startKeySet(t, a)
  keys.hang(true)
  const app = await startJwtApp(t, 'stub', { issuer: keys.issuer, jwksUrl: keys.url, jwksCooldownMs: COOLDOWN_MS, fetchTimeoutMs: TIMEOUT_MS })
  t.equal((await app.create(TOKEN)).status, 200, 'static token')
  t.equal((await app.create(await signToken(a, keys.issuer))).status, 503, 'JWT: 503')
  keys.hang(false)
  await sleep(COOLDOWN_MS + 100)
  t.equal((await app.create(await signToken(a, keys.issuer))).status, 200, 'once the issuer answers: 200')
})

t.test('a remembered token is refused once it expires', async (t) => {
  const { app, sign } = await setUp(t, 0)
  // exp is in whole seconds: +3 leaves the two creates at least 2 s before
  // it, slack for a busy machine (+2 left as little as 1 s).
  const token = await sign(undefined, { exp: Math.floor(Date.now() / 1000) + 3 })
  t.equal((await app.create(token)).status, 200)
  t.equal((await app.create(token)).status, 200, 'again, from memory')
  await sleep(4100)
  const res = await app.create(token)
  t.equal(res.status, 401, 'past exp: 401')
  t.equal(res.headers['www-authenticate'], EXPIRED)
})
