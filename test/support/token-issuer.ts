import { createServer, type Server, type ServerResponse } from 'node:http'
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

// `hang` makes it accept connections and never answer (an issuer that is down).
export interface OpenIdProvider { issuer: string, key: SigningKey, token(client: Client, scope?: string): Promise<string>, jwksFetches(): number, hang(on: boolean): void }

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
  let hanging = false
  const callback = provider.callback()
  server.on('request', (req, res) => {
    if (req.url === '/jwks') fetches++
    if (!hanging) callback(req, res)
  })
  t.teardown(() => closeServer(server))
  return {
    issuer,
    key,
    jwksFetches: () => fetches,
    hang: (on) => { hanging = on },
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

// A key set at /jwks (and nothing else) whose keys the test sets; `hang` makes it accept
// connections and never answer; `pad` makes the set carry a member of that
// many bytes, streamed as the client reads it, and `sent` tells how many
// bytes of the last answer went out (what a client read, give or take the
// sockets' buffers).
export interface KeySetServer {
  url: string
  issuer: string
  publish(...keys: SigningKey[]): void
  hang(on: boolean): void
  pad(bytes: number): void
  fetches(): number
  sent(): number
}

export async function startKeySet (t: Teardown, ...keys: SigningKey[]): Promise<KeySetServer> {
  let published = keys
  let hanging = false
  let padding = 0
  let fetches = 0
  let sent = 0
  const server = createServer((req, res) => {
    if (req.url === '/jwks') fetches++
    if (hanging) return
    // Nothing else: no discovery metadata, as for an issuer that publishes none.
    if (req.url !== '/jwks') {
      res.writeHead(404).end()
      return
    }
    res.writeHead(200, { 'content-type': 'application/json' })
    const body = JSON.stringify({ keys: published.map((k) => k.publicJwk), ...(padding > 0 ? { padding: '' } : {}) })
    if (padding === 0) {
      sent = body.length
      res.end(body)
      return
    }
    // The body up to the padding's opening quote, the padding, then `"}`.
    sent = 0
    streamPadded(res, body.slice(0, -2), padding, (n) => { sent += n }).catch(() => res.destroy())
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
    pad: (bytes) => { padding = bytes },
    fetches: () => fetches,
    sent: () => sent
  }
}

async function streamPadded (res: ServerResponse, head: string, bytes: number, count: (n: number) => void): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, 'x')
  res.write(head)
  count(head.length)
  for (let written = 0; written < bytes && !res.destroyed; written += chunk.length) {
    count(chunk.length)
    // Backpressure: no more than the client takes.
    if (!res.write(chunk)) await drainedOrClosed(res)
  }
  if (!res.destroyed) res.end('"}')
}

async function drainedOrClosed (res: ServerResponse): Promise<void> {
  await new Promise<void>((resolve) => {
    const done = (): void => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

async function closeServer (server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
}
