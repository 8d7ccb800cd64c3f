import { createServer, type Server } from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import Provider from 'oidc-provider'
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose'

// Token issuers for the JWT tests, on loopback: a real OpenID provider
// (oidc-provider, client credentials, RFC 9068 access tokens through its
// resource indicators feature), and a bare key-set server whose keys a test
// changes. Both sign with keys the test generates, so a test can sign any
// token it needs with jose's SignJWT.

interface Teardown { teardown(fn: () => unknown): void }

export const AUDIENCE = 'urn:plant-store'
export const SCOPE = 'plants:write'

export interface SigningKey { kid: string, alg: string, privateKey: CryptoKey, publicJwk: JWK, privateJwk: JWK }

export async function signingKey (kid: string, alg = 'RS256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true })
  const publicJwk = { ...await exportJWK(publicKey), kid, alg, use: 'sig' }
  const privateJwk = { ...await exportJWK(privateKey), kid, alg, use: 'sig' }
  return { kid, alg, privateKey, publicJwk, privateJwk }
}

// An access token as an issuer would make it, every part overridable: the
// claims (undefined removes one), the header, the key.
export async function signToken (
  key: SigningKey,
  issuer: string,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {}
): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  const payload = Object.fromEntries(Object.entries({
    iss: issuer, aud: AUDIENCE, sub: 'inventory', client_id: 'inventory', scope: SCOPE, iat: now, exp: now + 300, jti: `${Math.random()}`, ...claims
  }).filter(([, v]) => v !== undefined)) as JWTPayload
  return await new SignJWT(payload).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'at+jwt', ...header }).sign(key.privateKey)
}

export interface Client { id: string, secret: string }
export const WRITER: Client = { id: 'inventory', secret: 'inventory-secret-for-tests-only' }
export const READER: Client = { id: 'reporting', secret: 'reporting-secret-for-tests-only' }

export interface OpenIdProvider { issuer: string, key: SigningKey, token(client: Client, scope?: string): Promise<string>, jwksFetches(): number }

export async function startProvider (t: Teardown): Promise<OpenIdProvider> {
  const key = await signingKey('provider-key-1')
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const client = (c: Client, scope: string) => ({
    client_id: c.id, client_secret: c.secret, grant_types: ['client_credentials'], redirect_uris: [], response_types: [], scope
  })
  const provider = new Provider(issuer, {
    clients: [client(WRITER, SCOPE), client(READER, 'plants:read')],
    jwks: { keys: [key.privateJwk] },
    scopes: [SCOPE, 'plants:read'],
    ttl: { ClientCredentials: 300 },
    // Swagger UI on the service's origin asks for tokens from the browser.
    clientBasedCORS: () => true,
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => AUDIENCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({ scope: `${SCOPE} plants:read`, audience: AUDIENCE, accessTokenFormat: 'jwt', accessTokenTTL: 300, jwt: { sign: { alg: 'RS256' } } })
      }
    }
  })
  let fetches = 0
  const callback = provider.callback()
  server.on('request', (req, res) => {
    if (req.url === '/jwks') fetches++
    callback(req, res)
  })
  t.teardown(() => closeServer(server))
  return {
    issuer,
    key,
    jwksFetches: () => fetches,
    async token (c, scope = SCOPE) {
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`${c.id}:${c.secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope, resource: AUDIENCE }).toString()
      })
      const body = await res.json() as { access_token?: string }
      if (res.status !== 200 || body.access_token === undefined) throw new Error(`token endpoint answered ${res.status}: ${JSON.stringify(body)}`)
      return body.access_token
    }
  }
}

// A key set at /jwks whose keys the test sets; `hang` makes it accept
// connections and never answer.
export interface KeySetServer { url: string, issuer: string, publish(...keys: SigningKey[]): void, hang(on: boolean): void, fetches(): number }

export async function startKeySet (t: Teardown, ...keys: SigningKey[]): Promise<KeySetServer> {
  let published = keys
  let hanging = false
  let fetches = 0
  const server = createServer((req, res) => {
    fetches++
    if (hanging) return
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ keys: published.map((k) => k.publicJwk) }))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => closeServer(server))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url: `${origin}/jwks`,
    issuer: `${origin}/issuer`,
    publish: (...next) => { published = next },
    hang: (on) => { hanging = on },
    fetches: () => fetches
  }
}

async function closeServer (server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
}
