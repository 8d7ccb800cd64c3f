import t from 'tap'
import { openPglite, PGLITE_SHARED_BUFFERS } from '../../src/store/pglite/index.js'

// The embedded database's shared buffers are resident from start-up; the
// service keeps them small so its RSS stays within budget (bench/RESULTS.md).
t.test('embedded PGlite starts with small shared buffers', async (t) => {
  const db = await openPglite('memory://')
  t.teardown(async () => await db.close())
  const [row] = await db.query<{ shared_buffers: string }>('SHOW shared_buffers')
  t.equal(row?.shared_buffers, PGLITE_SHARED_BUFFERS)
  t.not(PGLITE_SHARED_BUFFERS, '128MB', 'not PostgreSQL\'s default')
  const [connections] = await db.query<{ max_connections: string }>('SHOW max_connections')
  t.ok(Number(connections?.max_connections) < 100, 'shared memory sized for a handful of connections, not 100')
})
