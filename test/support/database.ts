import { withClient } from '../helper.js'
import { openPglite } from '../../src/store/pglite.js'

// The plants table read directly, ids as exact decimal text: from PostgreSQL,
// or from a PGlite directory once the server that held it has exited.
export async function storedPlants (url: string | undefined, pgliteDir: string | undefined): Promise<Array<{ id: string, name: string, tag: string | null }>> {
  const sql = 'SELECT id::text AS id, name, tag FROM plants ORDER BY id'
  if (url !== undefined) return (await withClient(url, (c) => c.query(sql))).rows
  const db = await openPglite(pgliteDir as string)
  try {
    return await db.query(sql)
  } finally {
    await db.close()
  }
}
