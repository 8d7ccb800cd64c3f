import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { KEYS_COOLDOWN_MS as COOLDOWN_MS, startWithKeySet as setUp } from '../support/jwt-app.js'
import { signingKey, signToken, type SigningKey } from '../support/token-issuer.js'

// What the service takes from an issuer's key set, over real HTTP: a set
// past 256 KiB or 100 keys is a failed fetch (the last good set is kept),
// read no further than the bound; a token without kid is tried with each
// key that fits it.

t.test('a key set past 256 KiB is a failed fetch, read no further: the last good set is kept', async (t) => {
  // A fetch timeout long enough to read it all: the size alone must stop it.
  const { a, keys, app, sign } = await setUp(t, 30, 60_000)
  const b = await signingKey('key-b')
  keys.publish(a, b)
  // 64 MiB: a broken or hostile issuer.
  keys.pad(64 * 1024 * 1024)
  await sleep(COOLDOWN_MS + 100)
  const delay = monitorEventLoopDelay({ resolution: 10 })
  delay.enable()
  const res = await app.create(await sign(b))
  delay.disable()
  t.comment(`the service read about ${(keys.sent() / 1024).toFixed(0)} KiB of the set; longest event-loop delay ${(delay.max / 1e6).toFixed(0)} ms`)
  t.equal(res.status, 503, 'a key only in the oversized set: 503, as for an issuer that does not answer')
  t.ok(keys.sent() < 16 * 1024 * 1024, `no more than 16 MiB of 64 went out before the service stopped reading (${keys.sent()} bytes)`)
  t.equal((await app.create(await sign(a))).status, 200, 'a key of the last good set: 200')
  t.ok(app.logs.some((l) => l.includes('256 KiB')), 'the log says why')
})

t.test('a key set of more than 100 keys is a failed fetch; 100 are taken', async (t) => {
  const { a, keys, app, sign } = await setUp(t)
  const many = await Promise.all(Array.from({ length: 100 }, async (_, i) => await signingKey(`many-${i}`, 'ES256')))
  keys.publish(a, ...many)
  await sleep(COOLDOWN_MS + 100)
  t.equal((await app.create(await sign(many[0]))).status, 503, '101 keys: a failed fetch, 503')
  t.equal((await app.create(await sign(a))).status, 200, 'the last good set is kept')
  keys.publish(...many)
  await sleep(COOLDOWN_MS + 100)
  t.equal((await app.create(await sign(many[99]))).status, 200, '100 keys: taken')
})

t.test('a token without kid is verified against each key of its alg', async (t) => {
  const { a, keys, app, sign } = await setUp(t)
  const b = await signingKey('key-b')
  const es = await signingKey('key-es', 'ES256')
  keys.publish(a, b, es)
  await sleep(COOLDOWN_MS + 100)
  // Learn the new set through a kid it has.
  t.equal((await app.create(await sign(b))).status, 200, 'the set of three is fetched')
  const fetches = keys.fetches()
  const noKid = async (key: SigningKey): Promise<string> => await signToken(key, keys.issuer, {}, { kid: undefined })
  t.equal((await app.create(await noKid(a))).status, 200, 'RS256 without kid, by the first of two RS256 keys: 200')
  t.equal((await app.create(await noKid(b))).status, 200, 'by the second: 200')
  t.equal((await app.create(await noKid(es))).status, 200, 'ES256 without kid, the only key of its type: 200')
  const res = await app.create(await noKid(await signingKey('stranger')))
  t.equal(res.status, 401, 'by a key outside the set: 401')
  t.equal(res.headers['www-authenticate'], 'Bearer realm="plant-store", error="invalid_token", error_description="The access token is not valid"')
  t.equal(keys.fetches(), fetches, 'no fetch: no kid is not an unknown kid')
})
