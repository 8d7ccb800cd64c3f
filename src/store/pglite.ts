import { setFlagsFromString } from 'node:v8'
import { PGlite } from '@electric-sql/pglite'
import type { Db, Row, Sql } from './db.js'
import { asStoreError } from './errors.js'
import { makeWritableDirectory } from '../directory.js'

// PostgreSQL's default 128 MB of shared buffers is touched at start-up
// inside the WebAssembly memory, so it is resident from the first second:
// about 120 MB of the process's RSS. The embedded store serves small
// deployments whose tables fit in far less, and a page that is not in
// shared buffers is still in the OS page cache. 8 MB ran the benchmark as
// fast as 16 and 32 MB (bench/RESULTS.md).
export const PGLITE_SHARED_BUFFERS = '8MB'
// PGlite runs one backend, but shared memory (lock table, process slots)
// is sized for max_connections: PostgreSQL's default of 100 costs ~18 MB.
const PGLITE_MAX_CONNECTIONS = 8

// The embedded database: PostgreSQL compiled to WebAssembly, in this process.
// One PGlite instance may open a data directory at a time.
export async function openPglite (dataDir: string): Promise<Db> {
  if (!dataDir.startsWith('memory://')) makeWritableDirectory(dataDir)
  // V8 tiers PGlite's hot WebAssembly functions up to TurboFan in the
  // background; that held ~80 MB more resident memory and gave no
  // measurable throughput under `npm run bench` (bench/RESULTS.md), so the
  // embedded database stays on the baseline compiler, Liftoff. V8 reads the
  // flag when it compiles a module, so it is set before PGlite compiles its.
  setFlagsFromString('--liftoff-only')
  const db = await PGlite.create(dataDir, {
    startParams: [
      ...PGlite.defaultStartParams,
      '-c', `shared_buffers=${PGLITE_SHARED_BUFFERS}`,
      '-c', `max_connections=${PGLITE_MAX_CONNECTIONS}`
    ]
  })

  const wrap = (target: Pick<PGlite, 'query' | 'exec'>): Sql => ({
    async query<R extends Row = Row>(text: string, params?: unknown[]) {
      try {
        const result = await target.query<R>(text, params)
        return result.rows
      } catch (err) {
        throw asStoreError(err)
      }
    },
    async exec (text: string) {
      try {
        await target.exec(text)
      } catch (err) {
        throw asStoreError(err)
      }
    }
  })

  return {
    kind: 'pglite',
    ...wrap(db),
    async transaction (fn) {
      return await db.transaction(async (tx) => await fn(wrap(tx)))
    },
    async close () {
      if (!db.closed) await db.close()
    }
  }
}
