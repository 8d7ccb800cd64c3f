import Postgrator from 'postgrator'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Db } from './db.js'

// The project root, whether this runs from src/store/ (tsx) or from
// dist/src/store/ (built); migrations/ sits there in both layouts.
const above = dirname(dirname(dirname(fileURLToPath(import.meta.url))))
const projectRoot = basename(above) === 'dist' ? dirname(above) : above
export const migrationsDir = join(projectRoot, 'migrations')

// Any constant works; it only has to be the same for every instance.
export const MIGRATION_LOCK = 727_001

// Runs the pending migrations in one transaction that first takes a
// transaction-scoped advisory lock: instances starting together queue on the
// lock, and the second finds nothing left to do. A failing migration rolls
// back whole and the error propagates (start-up stops).
export async function migrate (db: Db): Promise<{ applied: number[], version: number }> {
  return await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
    const postgrator = new Postgrator({
      migrationPattern: join(migrationsDir, '*.sql').replaceAll('\\', '/'),
      driver: 'pg',
      schemaTable: 'schemaversion',
      currentSchema: 'public',
      execQuery: async (query: string) => ({ rows: await tx.query(query) }),
      execSqlScript: async (script: string) => { await tx.exec(script) }
    })
    const applied = await postgrator.migrate()
    const version = await postgrator.getDatabaseVersion()
    return { applied: applied.map((m) => m.version), version }
  })
}
