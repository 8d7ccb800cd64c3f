import Postgrator from 'postgrator'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Db } from './db.js'

// migrations/ is at the project root, whether this runs from src/store/ (tsx) or dist/src/store/.
const above = dirname(dirname(dirname(fileURLToPath(import.meta.url))))
const projectRoot = basename(above) === 'dist' ? dirname(above) : above
export const migrationsDir = join(projectRoot, 'migrations')

// Any constant works; it only has to be the same for every instance.
export const MIGRATION_LOCK = 727_001

// One transaction under an advisory lock: instances starting together queue
// on it and the second finds nothing to do; a failing migration rolls back whole.
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
