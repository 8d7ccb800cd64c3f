import pg from 'pg'
import { readdirSync } from 'node:fs'
import { migrationsDir, MIGRATION_LOCK } from '../../src/store/migrations.js'
import { createTestDatabase, type Teardown, type TestDatabase } from '../helper.js'
import { storedPlants, withClient, type StoredPlant } from './database.js'
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js'

// Tests that need a real PostgreSQL server (a proxy to cut, several
// processes on one database) run only when TEST_DATABASE_URL is set; CI sets
// it. Otherwise tap prints this reason.
export const needsPostgres: string | false =
  process.env.TEST_DATABASE_URL !== undefined && process.env.TEST_DATABASE_URL !== ''
    ? false
    : 'needs TEST_DATABASE_URL (a PostgreSQL server)'

// Rows as PostgreSQL holds them by id, read directly (never through a proxy).
export async function storedRows (url: string): Promise<Map<string, StoredPlant>> {
  return new Map((await storedPlants(url)).map((r) => [r.id, r]))
}

export interface ProxiedDatabase {
  testDb: TestDatabase & { url: string }
  proxy: TcpProxy
  // The database's URL through the proxy.
  proxiedUrl: string
}

// A fresh database and a proxy in front of it; both go when the test ends.
export async function proxiedDatabase (t: Teardown): Promise<ProxiedDatabase> {
  const testDb = await createTestDatabase('postgres') as TestDatabase & { url: string }
  const target = new URL(testDb.url)
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port === '' ? 5432 : target.port) })
  t.teardown(async () => {
    await proxy.close()
    await testDb.drop()
  })
  return { testDb, proxy, proxiedUrl: proxy.via(testDb.url) }
}

export const sleep = async (ms: number): Promise<void> => await new Promise((resolve) => setTimeout(resolve, ms))

// Polls until check() is true, and answers how long that took.
export async function timeUntil (check: () => Promise<boolean>, limitMs: number, everyMs = 50): Promise<number> {
  const start = performance.now()
  while (performance.now() - start < limitMs) {
    if (await check()) return performance.now() - start
    await sleep(everyMs)
  }
  throw new Error(`condition not met within ${limitMs} ms`)
}

// The versions of the "do" migrations on disk, ascending.
export function migrationVersions (): number[] {
  return readdirSync(migrationsDir)
    .filter((f) => /^\d+\.do\..*\.sql$/.test(f))
    .map((f) => Number.parseInt(f, 10))
    .sort((a, b) => a - b)
}

// The versions recorded in schemaversion, one entry per row, ascending.
// postgrator's own row for version 0 (the empty schema it starts from) is
// left out.
export async function appliedVersions (url: string): Promise<number[]> {
  const { rows } = await withClient(url, (c) => c.query<{ version: string }>('SELECT version::text AS version FROM schemaversion WHERE version <> 0 ORDER BY version'))
  return rows.map((r) => Number(r.version))
}

// The database answers, but the schema is not there yet: a client holds the
// migration lock, as an instance that is mid-migration does. commit() lets
// migrations proceed; the test's teardown ends the client and drops the database.
export async function heldMigrationLock (t: Teardown): Promise<{ testDb: TestDatabase & { url: string }, commit: () => Promise<void> }> {
  const testDb = await createTestDatabase('postgres') as TestDatabase & { url: string }
  const holder = new pg.Client({ connectionString: testDb.url })
  await holder.connect()
  t.teardown(async () => { await holder.end().catch(() => {}); await testDb.drop() })
  await holder.query('BEGIN')
  await holder.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
  return { testDb, commit: async () => { await holder.query('COMMIT') } }
}
