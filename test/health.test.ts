import t from 'tap'
import { backends, buildTestApp, assertErrorShape } from './helper.js'

for (const backend of backends()) {
  t.test(`health on ${backend}`, async (t) => {
    const { app } = await buildTestApp(t, backend)

    const live = await app.inject('/health/live')
    t.equal(live.statusCode, 200)
    t.same(live.json(), { status: 'ok' })

    const ready = await app.inject('/health/ready')
    t.equal(ready.statusCode, 200)
    t.same(ready.json(), { status: 'ready' })

    // With the database gone, the process is still live but not ready, and
    // creates answer 503 instead of hanging or crashing.
    await app.store.db.close()
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
}
