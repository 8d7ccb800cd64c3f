import { Writable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from '../../app.js'
import type { Config, JwtAuthConfig } from '../../src/config.js'
import { createTestDatabase, testConfig, type BackendName, type Teardown } from '../helper.js'
import { request, type HttpAnswer } from './http.js'
import { stubStore } from './stub-store.js'
import { AUDIENCE, SCOPE, signingKey, signToken, startKeySet } from './token-issuer.js'

// The service listening on loopback with JWT access tokens from `issuer`
// accepted beside the static test tokens; its log lines kept in memory.
export interface JwtApp {
  url: string
  logs: string[]
  create(token: string | undefined): Promise<HttpAnswer>
}

let nextId = 1000

// 'stub': over the stub store (test/support/stub-store.ts), for tests of
// tokens and keys that never read a row.
export async function startJwtApp (
  t: Teardown,
  backend: BackendName | 'stub',
  auth: Partial<JwtAuthConfig> & { issuer: string },
  overrides: Partial<Config> = {}
): Promise<JwtApp> {
  const logs: string[] = []
  const stream = new Writable({ write (chunk, _encoding, done) { logs.push(String(chunk)); done() } })
  const testDb = backend === 'stub' ? undefined : await createTestDatabase(backend)
  if (testDb !== undefined) t.teardown(() => testDb.drop())
  const config = testConfig(testDb?.database ?? { kind: 'pglite', dataDir: 'memory://' }, {
    logLevel: 'info',
    auth: { audience: AUDIENCE, requiredScope: SCOPE, clockSkewS: 30, maxClients: 100, ...auth },
    ...overrides
  })
  const app = await buildApp({ config, logger: { level: 'info', stream }, ...(testDb === undefined ? { store: stubStore() } : {}) })
  t.teardown(() => app.close())
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return {
    url,
    logs,
    create: async (token) => await request(`${url}/plants`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
      body: JSON.stringify({ id: nextId++, name: 'Fern' })
    })
  }
}

// The access line of the last answer with this status.
export function accessLine (logs: string[], status: number): Record<string, unknown> | undefined {
  return logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request' && l.status === status).at(-1)
}

// Short, so a test sees a refetch (the defaults are 30 s and 5 s).
export const KEYS_COOLDOWN_MS = 2500
export const KEYS_TIMEOUT_MS = 3000

export async function until (what: string, check: () => boolean, limitMs = 10_000): Promise<void> {
  const deadline = Date.now() + limitMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${limitMs} ms`)
    await sleep(20)
  }
}

// The service over the stub store with its keys at AUTH_JWKS_URL, a key-set server
// publishing key A, once it has fetched them (at start-up, ahead of the
// first token); `sign` makes a token of a key (A unless told).
export async function startWithKeySet (t: Teardown, clockSkewS = 30, fetchTimeoutMs = KEYS_TIMEOUT_MS) {
  const a = await signingKey('key-a')
  const keys = await startKeySet(t, a)
  const app = await startJwtApp(t, 'stub', { issuer: keys.issuer, jwksUrl: keys.url, jwksCooldownMs: KEYS_COOLDOWN_MS, fetchTimeoutMs, clockSkewS })
  await until('the first fetch', () => keys.fetches() === 1)
  return { a, keys, app, sign: async (key = a, claims: Record<string, unknown> = {}) => await signToken(key, keys.issuer, claims) }
}
