import t from 'tap'
import { forEachBackend, buildTestApp, assertErrorShape, TOKEN, OTHER_TOKEN } from '../helper.js'
import { bearerToken, tokenMatcher } from '../../plugins/auth.js'

const body = '{"id": 1, "name": "Monstera"}'
const REALM = 'Bearer realm="plant-store"'

t.test('tokenMatcher accepts exactly the configured tokens', async (t) => {
  const matches = tokenMatcher(['alpha-token', 'beta'])
  t.ok(matches('alpha-token'))
  t.ok(matches('beta'))
  for (const wrong of ['alpha', 'alpha-token2', 'beta ', '', 'BETA', 'alpha-tokenbeta']) {
    t.notOk(matches(wrong), `rejects ${JSON.stringify(wrong)}`)
  }
  // Compared at a fixed width with zero padding: the byte length decides too.
  t.notOk(matches('beta\u0000'), 'rejects a token with a NUL added (the same padded bytes)')
  t.notOk(matches(`beta${'\u0000'.repeat(300)}`), 'rejects it padded past the width')
})

t.test('tokenMatcher handles tokens longer than its 256-byte width', async (t) => {
  const long = 'k'.repeat(300)
  const matches = tokenMatcher([long, 'short'])
  t.ok(matches(long))
  t.ok(matches('short'))
  for (const wrong of [long.slice(0, -1), `${long}k`, 'k'.repeat(256), `${long}${'k'.repeat(200)}`, 'é'.repeat(150)]) {
    t.notOk(matches(wrong), `rejects ${wrong.length} characters`)
  }
})

t.test('tokenMatcher: a candidate cut short inside a character is not the token before the cut', async (t) => {
  // 252 bytes: a candidate of it and one more character leaves write() less
  // than a whole character of room in the 256-byte buffer.
  const token = 'k'.repeat(252)
  const matches = tokenMatcher([token, 'k'.repeat(255)])
  t.ok(matches(token))
  for (const extra of ['é', '€', '😀', '\ud800']) {
    t.notOk(matches(token + extra), `rejects the token and ${JSON.stringify(extra)}`)
    t.notOk(matches('k'.repeat(255) + extra), `rejects 255 bytes and ${JSON.stringify(extra)}`)
  }
  // After a long candidate, a short one is compared against zeros again.
  t.notOk(matches('k'.repeat(255) + 'x'))
  t.ok(matches(token))
  t.notOk(matches('k'))
})

t.test('bearerToken: the token after the scheme, whatever its case and the spaces around it', async (t) => {
  const cases: Array<[string | undefined, string | undefined]> = [
    ['Bearer abc', 'abc'],
    ['bearer abc', 'abc'],
    ['BEARER\tabc', 'abc'],
    ['Bearer   abc', 'abc'],
    ['Bearer abc \t', 'abc'],
    [' \tBearer abc', 'abc'],
    ['Bearer a b', 'a b'],
    ['Bearer ', ''],
    ['Bearer\t', ''],
    ['Bearer', undefined],
    ['Bearerabc', undefined],
    ['Basic abc', undefined],
    ['Bearer\u00a0abc', undefined],
    ['Bearer abc\u00a0', 'abc\u00a0'],
    [undefined, undefined]
  ]
  for (const [header, token] of cases) t.equal(bearerToken(header), token, JSON.stringify(header))
})

forEachBackend(t, 'authentication', async (t, backend) => {
  const { app, rows } = await buildTestApp(t, backend)
  const post = (headers: Record<string, string>, payload = body) =>
    app.inject({ method: 'POST', url: '/plants', headers, payload })

  t.test('no Authorization header: 401 with the bare challenge', async (t) => {
    const res = await post({ 'content-type': 'application/json' })
    assertErrorShape(t, res, 401)
    t.equal(res.headers['www-authenticate'], REALM)
  })

  t.test('another scheme: 401 with the bare challenge', async (t) => {
    const res = await post({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}`, 'content-type': 'application/json' })
    assertErrorShape(t, res, 401)
    t.equal(res.headers['www-authenticate'], REALM)
  })

  t.test('a wrong, prefix or extended token: 401 invalid_token', async (t) => {
    for (const token of ['nope', TOKEN.slice(0, -1), `${TOKEN}x`, `x${TOKEN}`, TOKEN.toUpperCase()]) {
      const res = await post({ authorization: `Bearer ${token}`, 'content-type': 'application/json' })
      assertErrorShape(t, res, 401)
      t.equal(res.headers['www-authenticate'], `${REALM}, error="invalid_token"`, token)
    }
  })

  t.test('"Bearer" with no token: 401 with the bare challenge', async (t) => {
    const res = await post({ authorization: 'Bearer ', 'content-type': 'application/json' })
    assertErrorShape(t, res, 401)
    t.equal(res.headers['www-authenticate'], REALM)
  })

  t.test('the scheme name is case-insensitive', async (t) => {
    for (const [i, scheme] of ['bearer', 'BEARER', 'BeArEr'].entries()) {
      const res = await post({ authorization: `${scheme} ${TOKEN}`, 'content-type': 'application/json' }, `{"id": ${30 + i}, "name": "${scheme}"}`)
      t.equal(res.statusCode, 200, scheme)
    }
  })

  t.test('every configured token is accepted (rotation)', async (t) => {
    const res = await post({ authorization: `Bearer ${OTHER_TOKEN}`, 'content-type': 'application/json' }, '{"id": 8, "name": "Second"}')
    t.equal(res.statusCode, 200)
  })

  t.test('authentication runs before the media type and the body are looked at', async (t) => {
    const before = (await rows()).length
    assertErrorShape(t, await post({ 'content-type': 'text/plain' }, 'not json'), 401)
    assertErrorShape(t, await post({ 'content-type': 'application/json' }, '{broken'), 401)
    assertErrorShape(t, await post({ authorization: 'Bearer wrong', 'content-type': 'application/json' }, '{"id": 99, "name": "x"}'), 401)
    t.equal((await rows()).length, before, 'nothing stored')
  })

  t.test('public endpoints need no token', async (t) => {
    t.equal((await app.inject({ url: '/health/live' })).statusCode, 200)
    t.equal((await app.inject({ url: '/health/ready' })).statusCode, 200)
  })
})
