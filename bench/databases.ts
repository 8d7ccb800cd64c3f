import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { withClient } from '../test/support/database.js'

export interface BenchDatabase {
  kind: 'postgres' | 'pglite'
  // Environment for the service.
  env: Record<string, string>
  // Rows in plants; call after the service has stopped.
  countRows(): Promise<number>
  drop(): Promise<void>
}

// A database of its own on the given server, dropped afterwards.
export async function createPostgresDatabase (adminUrl: string): Promise<BenchDatabase> {
  const name = `bench_${randomUUID().replaceAll('-', '')}`
  await withClient(adminUrl, async (c) => await c.query(`CREATE DATABASE ${name}`))
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    kind: 'postgres',
    env: { DATABASE_URL: url.toString() },
    countRows: async () => await withClient(url.toString(), async (c) =>
      Number((await c.query<{ n: string }>('SELECT count(*) AS n FROM plants')).rows[0]?.n)),
    drop: async () => { await withClient(adminUrl, async (c) => await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)) }
  }
}

// Embedded PGlite in a temporary directory, removed afterwards. The service
// must have stopped before countRows: one opener per directory.
export function createPgliteDatabase (): BenchDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-'))
  return {
    kind: 'pglite',
    env: { PGLITE_DATA_DIR: dir },
    async countRows () {
      const db = await PGlite.create(dir)
      try {
        const result = await db.query<{ n: number | bigint }>('SELECT count(*) AS n FROM plants')
        return Number(result.rows[0]?.n)
      } finally {
        await db.close()
      }
    },
    drop: async () => { rmSync(dir, { recursive: true, force: true }) }
  }
}
