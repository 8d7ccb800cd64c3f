import t from 'tap'
import { openPglite, PGLITE_SHARED_BUFFERS } from '../../src/store/pglite/index.js'

// The embedded database's shared buffers are resident from start-up (they are touched inside the WebAssembly
// memory), so the service keeps them small: PostgreSQL's default of 128 MB would be most of its memory budget
// (bench/RESULTS.md). Read back from the running database, so the settings are shown to reach PGlite's thread.
const MAX_SHARED_BUFFER_BYTES = 16 * 1024 * 1024

t.test('embedded PGlite starts with small shared buffers and few connection slots', async (t) => {
  const db = await openPglite('memory://')
  t.teardown(async () => await db.close())
  const [row] = await db.query<{ setting: string, bytes: string }>(
    "SELECT current_setting('shared_buffers') AS setting, pg_size_bytes(current_setting('shared_buffers'))::text AS bytes")
  t.equal(row?.setting, PGLITE_SHARED_BUFFERS, 'the configured size reaches the database')
  t.ok(Number(row?.bytes) <= MAX_SHARED_BUFFER_BYTES, `${row?.bytes ?? '?'} bytes of shared buffers, at most 16 MiB`)
  const [connections] = await db.query<{ max_connections: string }>('SHOW max_connections')
  t.ok(Number(connections?.max_connections) < 100, 'shared memory sized for a handful of connections, not 100')
})
