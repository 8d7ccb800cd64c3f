import { Writable } from 'node:stream'
import { buildApp } from '../../app.js'
import type { Config, JwtAuthConfig } from '../../src/config.js'
import { createTestDatabase, testConfig, type BackendName, type Teardown } from '../helper.js'
import { request, type HttpAnswer } from './http.js'
import { AUDIENCE, SCOPE } from './token-issuer.js'

// The service listening on loopback with JWT access tokens from `issuer`
// accepted beside the static test tokens; its log lines kept in memory.
export interface JwtApp {
  url: string
  logs: string[]
  create(token: string | undefined): Promise<HttpAnswer>
}

let nextId = 1000

export async function startJwtApp (
  t: Teardown,
  backend: BackendName,
  auth: Partial<JwtAuthConfig> & { issuer: string },
  overrides: Partial<Config> = {}
): Promise<JwtApp> {
  const logs: string[] = []
  const stream = new Writable({ write (chunk, _encoding, done) { logs.push(String(chunk)); done() } })
  const testDb = await createTestDatabase(backend)
  t.teardown(() => testDb.drop())
  const config = testConfig(testDb.database, {
    logLevel: 'info',
    auth: { audience: AUDIENCE, requiredScope: SCOPE, clockSkewS: 30, maxClients: 100, ...auth },
    ...overrides
  })
  const app = await buildApp({ config, logger: { level: 'info', stream } })
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
