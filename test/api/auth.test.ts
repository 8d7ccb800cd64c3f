import t from 'tap'
import { forEachBackend, buildTestApp, assertErrorShape, TOKEN, OTHER_TOKEN } from '../helper.js'
import { bearerToken, staticCallerCount, staticCallerName, staticCallers } from '../../plugins/auth.js'

const body = '{"id": 1, "name": "Monstera"}'
const REALM = 'Bearer realm="plant-store"'

const matcher = (tokens: string[]) => {
  const callerOf = staticCallers(tokens)
  return (candidate: string): boolean => callerOf(candidate) !== undefined
}

t.test('static tokens are found by digest: exactly the configured tokens', async (t) => {
  const matches = matcher(['alpha-token', 'beta'])
  t.ok(matches('alpha-token'))
  t.ok(matches('beta'))
  for (const wrong of ['alpha', 'alpha-token2', 'beta ', '', 'BETA', 'alpha-tokenbeta', 'beta\u0000', `beta${'\u0000'.repeat(300)}`]) {
    t.notOk(matches(wrong), `rejects ${JSON.stringify(wrong)}`)
  }
  const long = 'k'.repeat(300)
  const withLong = matcher([long, 'short'])
  t.ok(withLong(long))
  for (const wrong of [long.slice(0, -1), `${long}k`, 'k'.repeat(256), 'é'.repeat(150), `${'k'.repeat(252)}é`]) {
    t.notOk(withLong(wrong), `rejects ${wrong.length} characters`)
  }
})

t.test('a static token\'s caller: its configured name, else the start of its digest', async (t) => {
  const names = new Map([['alpha-token', 'billing'], ['alpha-token-new', 'billing']])
  const callerOf = staticCallers(['alpha-token', 'alpha-token-new', 'beta'], names)
  t.equal(callerOf('alpha-token'), 'billing')
  t.equal(callerOf('alpha-token-new'), 'billing', 'two tokens of one caller (a rotation) share its name')
  t.match(callerOf('beta'), /^token-[0-9a-f]{12}$/)
  t.notMatch(callerOf('beta'), /beta/, 'never the token')
  t.equal(staticCallerName('beta'), callerOf('beta'), 'stable')
  t.equal(staticCallerCount(['alpha-token', 'alpha-token-new', 'beta'], names), 2, 'callers, not tokens')
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
