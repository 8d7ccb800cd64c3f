import pg from 'pg'
import { openPglite } from '../../src/store/pglite/index.js'

// Reading the database directly, for the tests and the benchmark.

export async function withClient<T> (url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

export interface StoredPlant { id: string, name: string, tag: string | null }

// The plants table as stored, ids as exact decimal text, in id order.
export const STORED_PLANTS_SQL = 'SELECT id::text AS id, name, tag FROM plants ORDER BY id'

// The plants table read directly: from PostgreSQL, or from a PGlite
// directory once the server that held it has exited (one opener at a time).
export async function storedPlants (url: string | undefined, pgliteDir?: string): Promise<StoredPlant[]> {
  if (url !== undefined) return (await withClient(url, (c) => c.query<StoredPlant>(STORED_PLANTS_SQL))).rows
  const db = await openPglite(pgliteDir as string)
  try {
    return await db.query<StoredPlant & Record<string, unknown>>(STORED_PLANTS_SQL)
  } finally {
    await db.close()
  }
}
