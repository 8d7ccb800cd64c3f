import t from 'tap'
import { forEachBackend, buildTestApp, assertErrorShape, postPlant, testConfig, untilMigrated } from '../helper.js'
import { buildApp } from '../../app.js'
import { heldMigrationLock, needsPostgres } from '../support/postgres.js'

forEachBackend(t, 'health', async (t, backend) => {
  const { app } = await buildTestApp(t, backend)

  const live = await app.inject('/health/live')
  t.equal(live.statusCode, 200)
  t.same(live.json(), { status: 'ok' })

  const ready = await app.inject('/health/ready')
  t.equal(ready.statusCode, 200)
  t.same(ready.json(), { status: 'ready' })

  // With the database gone, the process is still live but not ready, and
  // creates answer 503 instead of hanging or crashing.
  await app.db.close()
  const notReady = await app.inject('/health/ready')
  assertErrorShape(t, notReady, 503)
  t.equal(notReady.headers['retry-after'], '5')
  t.equal((await app.inject('/health/live')).statusCode, 200)
  const create = await app.inject({
    method: 'POST',
    url: '/plants',
    headers: { authorization: 'Bearer test-token-3c1f0b6a', 'content-type': 'application/json' },
    payload: '{"id": 1, "name": "x"}'
  })
  assertErrorShape(t, create, 503)
})

// The database answers, but the schema is not there yet: another instance
// holds the migration lock (as one that is mid-migration does).
t.test('ready only once the migrations are applied', { skip: needsPostgres }, async (t) => {
  const { testDb, commit } = await heldMigrationLock(t)

  const app = await buildApp({
    config: testConfig(testDb.database, { dbTimeoutMs: 500 }),
    background: { onFatal: (err) => t.fail(`migrations failed: ${String(err)}`) }
  })
  await app.ready()
  t.teardown(() => app.close())

  t.same(await app.db.query('SELECT 1 AS one'), [{ one: 1 }], 'the database answers')
  assertErrorShape(t, await app.inject('/health/ready'), 503)
  assertErrorShape(t, await postPlant(app, '{"id": 1, "name": "early"}'), 503)

  await commit()
  await untilMigrated(app)
  t.equal((await app.inject('/health/ready')).statusCode, 200, 'ready once migrated')
  t.equal((await postPlant(app, '{"id": 1, "name": "early"}')).statusCode, 200, 'creates work')
})
