import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { KEYS_COOLDOWN_MS as COOLDOWN_MS, startWithKeySet as setUp } from '../support/jwt-app.js'
import { signingKey } from '../support/token-issuer.js'

// What the service takes from an issuer's key set, over real HTTP: a set
// past 256 KiB or 100 keys is a failed fetch (the last good set is kept),
// read no further than the bound.

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
