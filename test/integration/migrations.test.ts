import t from 'tap'
import { createTestDatabase, forEachBackend } from '../helper.js'
import { withClient } from '../support/database.js'
import { openPglite } from '../../src/store/pglite/index.js'
import { openPostgres } from '../../src/store/postgres.js'
import { migrate, migrationsDir } from '../../src/store/migrations.js'
import type { Db } from '../../src/store/db.js'
import pino from 'pino'
import { readdirSync } from 'node:fs'

const silent = pino({ level: 'silent' })

// The highest "do" version in migrations/ (postgrator naming: 001.do.name.sql).
const latestVersion = Math.max(...readdirSync(migrationsDir).flatMap((f) => /^(\d+)\.do\./.exec(f)?.[1] ?? []).map(Number))

forEachBackend(t, 'migrations create the plants table as the contract describes', async (t, backend) => {
  const testDb = await createTestDatabase(backend, { empty: true })
  const db: Db = testDb.database.kind === 'postgres'
    ? openPostgres({ url: testDb.database.url, timeoutMs: 5000, log: silent })
    : await openPglite(testDb.database.dataDir)
  t.teardown(async () => { await db.close(); await testDb.drop() })

  const first = await migrate(db)
  t.same(first.applied, [1], `${backend}: the first run applies 001`)
  t.equal(first.version, latestVersion, 'the highest version in migrations/')
  const again = await migrate(db)
  t.same(again.applied, [], `${backend}: a second run applies nothing`)

  const columns = await db.query<{ column_name: string, data_type: string, is_nullable: string, column_default: string | null }>(
    "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_name = 'plants' ORDER BY ordinal_position")
  t.same(columns.map((c) => [c.column_name, c.data_type, c.is_nullable]), [
    ['id', 'bigint', 'NO'],
    ['name', 'text', 'NO'],
    ['tag', 'text', 'YES'],
    ['created_at', 'timestamp with time zone', 'NO']
  ], `${backend}: columns`)
  t.match(columns[3]?.column_default, /now\(\)/)
  const pk = await db.query<{ column_name: string }>(
    "SELECT a.attname AS column_name FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'plants'::regclass AND i.indisprimary")
  t.same(pk.map((r) => r.column_name), ['id'], `${backend}: id is the primary key`)
})

t.test('instances migrating at once apply each migration once', { skip: process.env.TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL (PostgreSQL)' }, async (t) => {
  const testDb = await createTestDatabase('postgres')
  const dbs = Array.from({ length: 4 }, () => openPostgres({ url: testDb.url as string, timeoutMs: 5000, log: silent }))
  t.teardown(async () => { await Promise.all(dbs.map((db) => db.close())); await testDb.drop() })
  const results = await Promise.all(dbs.map((db) => migrate(db)))
  t.equal(results.filter((r) => r.applied.length > 0).length, 1, 'exactly one instance applied it')
  const rows = await withClient(testDb.url as string, (c) => c.query('SELECT version FROM schemaversion ORDER BY version'))
  // postgrator keeps a version-0 row for the empty schema; each migration has one row
  const versions = rows.rows.map((r: { version: string | number }) => Number(r.version)).filter((v) => v > 0)
  t.same(versions, [1], 'one row for migration 001')
})
