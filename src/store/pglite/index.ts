import { existsSync } from 'node:fs'
import { statfs } from 'node:fs/promises'
import { join } from 'node:path'
import type { Db, QueryOptions, Row } from '../db.js'
import { sentWriteError, StoreUnavailableError } from '../store-errors.js'
import { makeWritableDirectory } from '../../directory.js'
import { lockDataDir } from './data-dir-lock.js'
import { pgliteOverThread, startPgliteThread, type Connection } from './thread-calls.js'

// Shared buffers are touched at start-up inside the WebAssembly memory, so all are resident at once; a page not
// in them is still in the OS page cache, and a small size ran the benchmark as fast (bench/RESULTS.md).
export const PGLITE_SHARED_BUFFERS = '8MB'
// PGlite runs one backend, but shared memory (lock table, process slots) is sized for max_connections.
export const PGLITE_MAX_CONNECTIONS = 8

// The embedded database, on a thread of its own (thread-calls.ts), its directory locked first: one process at a time.
export async function openPglite (dataDir: string): Promise<Db> {
  const inMemory = dataDir.startsWith('memory://')
  if (!inMemory) makeWritableDirectory(dataDir)
  const lock = inMemory ? undefined : lockDataDir(dataDir)
  const extraStartParams = ['-c', `shared_buffers=${PGLITE_SHARED_BUFFERS}`, '-c', `max_connections=${PGLITE_MAX_CONNECTIONS}`]
  const thread = { dataDir, extraStartParams }
  let db: Connection
  try {
    // A new directory is initialised (initdb) by a thread that then ends: one that stayed would keep initdb's peak resident.
    if (!inMemory && !existsSync(join(dataDir, 'PG_VERSION'))) {
      await (await pgliteOverThread(startPgliteThread(thread))).close()
    }
    db = await pgliteOverThread(startPgliteThread(thread))
  } catch (err) {
    lock?.release()
    throw err
  }
  return {
    ...db,
    // One statement at a time: a second batch would only wait inside PGlite.
    writers: 1,
    // PGlite cannot cancel a statement (WebAssembly has no timer signal), so a batch that ends past the deadline is
    // rolled back. Only a COMMIT that was sent leaves the outcome unknown.
    async writeBefore<R extends Row = Row> (deadline: number, text: string, params?: unknown[], options?: QueryOptions): Promise<R[]> {
      let committing = false
      return await db.transaction(async (tx) => {
        const written = await tx.query<R>(text, params, options)
        if (performance.now() > deadline) throw new StoreUnavailableError('writing the batch passed its deadline; rolled back')
        committing = true
        return written
      }).catch((err: unknown) => { throw committing ? sentWriteError(err) : err })
    },
    ...(inMemory ? {} : { freeBytes: async () => await statfs(dataDir).then((s) => s.bavail * s.bsize) }),
    close: async () => { await db.close().finally(() => lock?.release()) }
  }
}
