import t from 'tap'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { base64url, SignJWT } from 'jose'
import { forEachBackend, TOKEN } from '../helper.js'
import { request } from '../support/http.js'
import { metricsUrlOf, parseSamples, valueOf } from '../support/prometheus.js'
import { accessLine, startJwtApp } from '../support/jwt-app.js'
import { AUDIENCE, READER, signToken, startProvider, WRITER } from '../support/token-issuer.js'
import { root } from '../support/processes.js'

// JWT access tokens from a real OpenID provider (oidc-provider, client
// credentials) over real HTTP, on both backends; the refused tokens are
// signed by the test with the provider's own key.

const REALM = 'Bearer realm="plant-store"'
const INVALID = `${REALM}, error="invalid_token", error_description="The access token is not valid"`
const EXPIRED = `${REALM}, error="invalid_token", error_description="The access token expired"`

forEachBackend(t, 'a provider\'s access tokens', async (t, backend) => {
  const provider = await startProvider(t)
  const app = await startJwtApp(t, backend, { issuer: provider.issuer }, { metricsPort: 0 })

  t.test('a token with the scope: 200, its client on the access line and in the metrics', async (t) => {
    const token = await provider.token(WRITER)
    const res = await app.create(token)
    t.equal(res.status, 200, res.body)
    t.match(accessLine(app.logs, 200), { caller: WRITER.id, outcome: 'created' })
    const samples = parseSamples((await request(metricsUrlOf(app.logs))).body)
    t.equal(valueOf(samples, 'plant_store_creates_by_caller_total', { caller: WRITER.id, outcome: 'created' }), 1)
  })

  t.test('a client without the scope: 403 insufficient_scope', async (t) => {
    const res = await app.create(await provider.token(READER, 'plants:read'))
    t.equal(res.status, 403)
    t.equal(res.headers['www-authenticate'], `${REALM}, error="insufficient_scope", scope="plants:write"`)
    t.same(JSON.parse(res.body), { error: 403, message: 'The access token lacks the scope plants:write' })
  })

  t.test('a static token still works beside them', async (t) => {
    t.equal((await app.create(TOKEN)).status, 200)
  })

  t.test('claims: time with skew, iss, aud, sub, client_id', async (t) => {
    const now = Math.floor(Date.now() / 1000)
    const sign = (claims: Record<string, unknown>, header: Record<string, unknown> = {}) => signToken(provider.key, provider.issuer, claims, header)
    t.equal((await app.create(await sign({ exp: now - 10 }))).status, 200, 'expired 10 s ago, within the 30 s skew: 200')
    const cases: Array<[string, Record<string, unknown>, Record<string, unknown>, string]> = [
      ['expired beyond the skew', { exp: now - 60 }, {}, EXPIRED],
      ['nbf in the future', { nbf: now + 120 }, {}, INVALID],
      ['iat in the future', { iat: now + 120 }, {}, INVALID],
      ['another iss', { iss: 'http://127.0.0.1:1/other' }, {}, INVALID],
      ['iss with a trailing slash', { iss: `${provider.issuer}/` }, {}, INVALID],
      ['no iss', { iss: undefined }, {}, INVALID],
      ['another aud', { aud: 'urn:another-api' }, {}, INVALID],
      ['no aud', { aud: undefined }, {}, INVALID],
      ['no sub', { sub: undefined }, {}, INVALID],
      ['no client_id', { client_id: undefined }, {}, INVALID],
      ['no exp', { exp: undefined }, {}, INVALID],
      ['typ JWT', {}, { typ: 'JWT' }, INVALID],
      ['no typ', {}, { typ: undefined }, INVALID]
    ]
    for (const [what, claims, header, challenge] of cases) {
      const res = await app.create(await sign(claims, header))
      t.equal(res.status, 401, `${what}: 401`)
      t.equal(res.headers['www-authenticate'], challenge, `${what}: ${challenge}`)
    }
    // jose will not sign an extension it does not know: signed here by hand.
    const critical = { alg: 'RS256', typ: 'at+jwt', kid: provider.key.kid, crit: ['urn:plant-store:unknown'], 'urn:plant-store:unknown': true }
    const good = await sign({})
    const input = `${base64url.encode(JSON.stringify(critical))}.${good.split('.')[1] as string}`
    const signature = await crypto.subtle.sign('RSASSA-PKCS1-v1_5', provider.key.privateKey, new TextEncoder().encode(input))
    const res = await app.create(`${input}.${base64url.encode(new Uint8Array(signature))}`)
    t.equal(res.status, 401, 'an unknown crit: 401')
    t.equal(res.headers['www-authenticate'], INVALID, 'an unknown crit')
  })

  t.test('algorithms and signatures: none, HS256 with the public key, a bad signature', async (t) => {
    const good = await provider.token(WRITER)
    const [header, payload, signature] = good.split('.') as [string, string, string]
    const none = `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'at+jwt', kid: provider.key.kid }))}.${payload}.`
    const claims = JSON.parse(new TextDecoder().decode(base64url.decode(payload))) as Record<string, unknown>
    const hmacWith = async (secret: string) => await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: provider.key.kid }).sign(new TextEncoder().encode(secret))
    const flipped = `${header}.${payload}.${signature.slice(0, -2)}${signature.endsWith('AA') ? 'BB' : 'AA'}`
    const bad: Array<[string, string]> = [
      ['alg none', none],
      ['HS256 keyed with the public JWK', await hmacWith(JSON.stringify(provider.key.publicJwk))],
      ['HS256 keyed with the modulus', await hmacWith(String(provider.key.publicJwk.n))],
      ['a bad signature', flipped],
      ['another payload under the signature', `${header}.${base64url.encode(JSON.stringify({ ...claims, client_id: 'admin' }))}.${signature}`]
    ]
    for (const [what, token] of bad) {
      const res = await app.create(token)
      t.equal(res.status, 401, `${what}: 401`)
      t.equal(res.headers['www-authenticate'], INVALID, what)
    }
    t.equal((await app.create(good)).status, 200, 'the token itself is good')
  })

  t.test('no token reaches the log; the reason of a refusal does', async (t) => {
    const token = await provider.token(WRITER)
    await app.create(token)
    const tokens = [token, TOKEN]
    t.notOk(app.logs.some((line) => tokens.some((tok) => line.includes(tok) || line.includes(tok.split('.')[2] ?? tok))), 'no token, nor a signature')
    t.ok(app.logs.some((line) => line.includes('"authFailure"') && line.includes('aud')), 'which claim failed is logged')
  })
})

t.test('with an issuer: RFC 9728 metadata, and the client-credentials flow in the served document', async (t) => {
  const provider = await startProvider(t)
  const app = await startJwtApp(t, 'stub', { issuer: provider.issuer })
  const metadata = await request(`${app.url}/.well-known/oauth-protected-resource`)
  t.equal(metadata.status, 200, 'public')
  t.same(JSON.parse(metadata.body), {
    resource: AUDIENCE,
    authorization_servers: [provider.issuer],
    scopes_supported: ['plants:write'],
    bearer_methods_supported: ['header'],
    resource_name: 'Plant store API'
  })
  // The token URL comes from discovery, read with the keys at start-up.
  await app.create(await provider.token(WRITER))
  const doc = JSON.parse((await request(`${app.url}/openapi.json`)).body) as {
    components: { securitySchemes: Record<string, { flows?: unknown }> }, security: unknown[], paths: Record<string, { post: { responses: Record<string, unknown> } }>
  }
  t.same(doc.components.securitySchemes.oauth2?.flows, { clientCredentials: { tokenUrl: `${provider.issuer}/token`, scopes: { 'plants:write': 'Add plants to the store' } } })
  t.ok(doc.components.securitySchemes.bearerAuth, 'beside bearerAuth')
  t.same(doc.security, [{ bearerAuth: [] }, { oauth2: ['plants:write'] }], 'either one')
  const page = await request(`${app.url}/docs`)
  t.match(page.headers['content-security-policy'], `connect-src 'self' ${provider.issuer};`, 'Swagger UI may ask the issuer for a token')
  t.ok(doc.paths['/plants']?.post.responses['403'], 'a JWT without the scope gets 403: documented')
  const committed = JSON.parse(readFileSync(`${root}/openapi.json`, 'utf8')) as typeof doc
  t.notOk('oauth2' in committed.components.securitySchemes, 'the committed document has no issuer')
  t.notOk(committed.paths['/plants']?.post.responses['403'], 'nor its 403')
})

t.test('AUTH_JWKS_URL without AUTH_TOKEN_URL: discovery still gives the flow its token URL, and a provider down at start-up stops nothing', async (t) => {
  const provider = await startProvider(t)
  provider.hang(true)
  const app = await startJwtApp(t, 'stub', { issuer: provider.issuer, jwksUrl: `${provider.issuer}/jwks`, fetchTimeoutMs: 1000, jwksCooldownMs: 1500 })
  t.equal((await app.create(TOKEN)).status, 200, 'the service started; static tokens work')
  const flow = async (): Promise<unknown> => {
    const doc = JSON.parse((await request(`${app.url}/openapi.json`)).body) as { components: { securitySchemes: Record<string, { flows?: unknown }> } }
    return doc.components.securitySchemes.oauth2?.flows
  }
  t.equal(await flow(), undefined, 'no token URL known yet: no flow')
  provider.hang(false)
  // Each load of the document while the token URL is unknown may ask the
  // issuer again, once per cooldown.
  const deadline = Date.now() + 15_000
  let flows = await flow()
  while (flows === undefined && Date.now() < deadline) {
    await sleep(250)
    flows = await flow()
  }
  t.same(flows, { clientCredentials: { tokenUrl: `${provider.issuer}/token`, scopes: { 'plants:write': 'Add plants to the store' } } }, 'the flow, once the provider answers')
  t.equal((await app.create(await provider.token(WRITER))).status, 200, 'its tokens are accepted')
})

t.test('the rate limit follows the client across its token refreshes', async (t) => {
  const provider = await startProvider(t)
  const app = await startJwtApp(t, 'stub', { issuer: provider.issuer }, { rateLimitPerMinute: 2 })
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await app.create(await provider.token(WRITER))).status)
  t.same(statuses, [200, 200, 429], 'a new token for each create, one window for the client')
  t.equal((await app.create(TOKEN)).status, 200, 'a static token\'s caller has a window of its own')
})
