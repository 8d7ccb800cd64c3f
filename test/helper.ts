import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Test } from 'tap'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import type { AddressInfo } from 'node:net'
import { buildApp, type AppOptions } from '../app.js'
import type { Config } from '../src/config.js'
import { STORED_PLANTS_SQL, withClient, type StoredPlant } from './support/database.js'
import { migratedDataDir } from './support/pglite-template.js'
import { stubStore, type StubStore } from './support/stub-store.js'

export const TOKEN = 'test-token-3c1f0b6a'
export const OTHER_TOKEN = 'second-token-for-rotation'

// Every test file runs on embedded PGlite, and also on PostgreSQL when
// TEST_DATABASE_URL names a server (CI sets it). Each run gets a database of
// its own, so files can run in parallel.
export type BackendName = 'pglite' | 'postgres'

export interface TestDatabase {
  database: Config['database']
  // The URL of the database itself (PostgreSQL only), for direct checks.
  url?: string
  drop(): Promise<void>
}

export function backends (): BackendName[] {
  return process.env.TEST_DATABASE_URL !== undefined && process.env.TEST_DATABASE_URL !== ''
    ? ['pglite', 'postgres']
    : ['pglite']
}

// The same test once per backend, named "<name> on <backend>".
export function forEachBackend (
  t: Pick<Test, 'test'>,
  name: string,
  fn: (t: Test, backend: BackendName) => Promise<void>
): void {
  for (const backend of backends()) t.test(`${name} on ${backend}`, (t) => fn(t, backend))
}

// A PostgreSQL database is created empty (the app migrates it); a PGlite one
// is a copy of a migrated template (test/support/pglite-template.ts), unless
// `empty` asks for one no migration has touched.
export async function createTestDatabase (backend: BackendName, { empty = false } = {}): Promise<TestDatabase> {
  if (backend === 'pglite' && empty) return { database: { kind: 'pglite', dataDir: 'memory://' }, drop: async () => {} }
  if (backend === 'pglite') {
    const { dataDir, remove } = await migratedDataDir()
    return { database: { kind: 'pglite', dataDir }, drop: async () => { remove() } }
  }
  const adminUrl = process.env.TEST_DATABASE_URL as string
  const name = `test_${randomUUID().replaceAll('-', '')}`
  await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`))
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    database: { kind: 'postgres', url: url.toString() },
    url: url.toString(),
    drop: () => withClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {})
  }
}

export function testConfig (database: Config['database'], overrides: Partial<Config> = {}): Config {
  return {
    port: 0,
    host: '127.0.0.1',
    database,
    apiTokens: [TOKEN, OTHER_TOKEN],
    bodyLimit: 1048576,
    logLevel: 'silent',
    dbTimeoutMs: 2000,
    production: false,
    ...overrides
  }
}

export interface TestApp {
  app: FastifyInstance
  backend: BackendName
  testDb: TestDatabase
  // Rows as the database holds them, ids as exact decimal text.
  rows(): Promise<StoredPlant[]>
}

// What a test offers to clean up after it (tap's Test).
export interface Teardown { teardown(fn: () => unknown): void }

// Builds the same app the server builds, on a fresh database; closes and
// drops it when the test ends.
export async function buildTestApp (
  t: Teardown,
  backend: BackendName,
  overrides: Partial<Config> = {},
  logger: FastifyServerOptions['logger'] = false
): Promise<TestApp> {
  const testDb = await createTestDatabase(backend)
  const app = await buildApp({ config: testConfig(testDb.database, overrides), logger })
  await app.ready()
  t.teardown(async () => {
    await app.close()
    await testDb.drop()
  })
  return {
    app,
    backend,
    testDb,
    rows: () => app.db.query<StoredPlant & Record<string, unknown>>(STORED_PLANTS_SQL)
  }
}

// The same app over a stub store (test/support/stub-store.ts), with no
// database: for tests that never read a row.
export async function buildStubApp (
  t: Teardown,
  overrides: Partial<Config> = {},
  logger: FastifyServerOptions['logger'] = false
): Promise<{ app: FastifyInstance, store: StubStore }> {
  const store = stubStore()
  const app = await buildApp({ config: testConfig({ kind: 'pglite', dataDir: 'memory://' }, overrides), logger, store })
  await app.ready()
  t.teardown(() => app.close())
  return { app, store }
}

type ListenOptions = Pick<AppOptions, 'timeouts' | 'logger' | 'apiRoutes'>

// The app listening on a loopback port of its own, on a fresh database, for
// raw-socket and real-HTTP tests; closed and dropped when the test ends.
export async function listeningTestApp (t: Teardown, backend: BackendName, opts: ListenOptions = {}): Promise<{ app: FastifyInstance, port: number }> {
  const testDb = await createTestDatabase(backend)
  const app = await buildApp({ config: testConfig(testDb.database), ...opts })
  t.teardown(async () => {
    await app.close()
    await testDb.drop()
  })
  return { app, port: await listen(app) }
}

// The same over a stub store, with no database.
export async function listeningStubApp (t: Teardown, opts: ListenOptions = {}): Promise<{ app: FastifyInstance, port: number, store: StubStore }> {
  const store = stubStore()
  const app = await buildApp({ config: testConfig({ kind: 'pglite', dataDir: 'memory://' }), ...opts, store })
  t.teardown(() => app.close())
  return { app, port: await listen(app), store }
}

async function listen (app: FastifyInstance): Promise<number> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  return (app.server.address() as AddressInfo).port
}

// Resolves once the app's migrations are applied: an app started with
// `background` serves before then.
export async function untilMigrated (app: FastifyInstance, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!app.plants.isMigrated()) {
    if (Date.now() > deadline) throw new Error(`migrations not applied within ${timeoutMs} ms`)
    await sleep(10)
  }
}

export const auth = (token = TOKEN): Record<string, string> => ({ authorization: `Bearer ${token}` })

export const jsonHeaders = (token = TOKEN): Record<string, string> => ({
  ...auth(token),
  'content-type': 'application/json'
})

// POST /plants with a raw body string, authorised and typed as JSON.
export async function postPlant (app: FastifyInstance, body: string, headers: Record<string, string> = jsonHeaders()) {
  return await app.inject({ method: 'POST', url: '/plants', headers, payload: body })
}

export function assertErrorShape (
  t: Pick<Test, 'equal' | 'ok' | 'same'>,
  res: { statusCode: number, headers: Record<string, unknown>, body: string },
  status: number
): { error: number, message: string } {
  t.equal(res.statusCode, status, `status ${status}`)
  t.ok(String(res.headers['content-type']).startsWith('application/json'), 'Error body is JSON')
  const body = JSON.parse(res.body) as { error: number, message: string }
  t.same(Object.keys(body).sort(), ['error', 'message'], 'exactly error and message')
  t.equal(body.error, status, 'error equals the HTTP status')
  t.ok(typeof body.message === 'string' && body.message.length > 0, 'non-empty message')
  return body
}
