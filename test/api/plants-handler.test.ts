import t from 'tap'
import Fastify from 'fastify'
import fp from 'fastify-plugin'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import jsonBody from '../../plugins/json-body.js'
import plantsRoutes from '../../routes/plants.js'
import { errorHandler } from '../../plugins/error-answers.js'
import { RETRY_AFTER_SECONDS } from '../../src/http-error.js'
import { StoreUnavailableError } from '../../src/store/store-errors.js'
import type { CreateOutcome, PlantRecord, PlantStore } from '../../src/store/plant-store.js'
import { assertErrorShape, type Teardown } from '../helper.js'

// The route's own logic, with no database: routes/plants.ts over a store
// that answers what each test tells it to. What the real store does is
// tested in test/integration/plant-store.test.ts; the whole request path over both
// backends in test/api/plants.test.ts.
async function routeOver (t: Teardown, create: (plant: PlantRecord) => Promise<CreateOutcome>) {
  const received: PlantRecord[] = []
  const app = Fastify().withTypeProvider<TypeBoxTypeProvider>()
  app.setErrorHandler(errorHandler)
  await app.register(jsonBody)
  // The two plugins the route names as dependencies, as stand-ins.
  await app.register(fp(async (fastify) => {
    fastify.decorate('plants', {
      create: async (plant: PlantRecord) => {
        received.push(plant)
        return await create(plant)
      }
    } as unknown as PlantStore)
  }, { name: 'db' }))
  await app.register(fp(async () => {}, { name: 'auth' }))
  await app.register(plantsRoutes)
  t.teardown(() => app.close())
  const post = async (payload: string) =>
    await app.inject({ method: 'POST', url: '/plants', headers: { 'content-type': 'application/json' }, payload })
  return { post, received }
}

t.test('created: 200 with the stored Plant; the store gets the exact id', async (t) => {
  const { post, received } = await routeOver(t, async (plant) => ({ kind: 'created', plant }))
  const res = await post('{"id": 9007199254740993, "name": "Monstera", "tag": "indoor"}')
  t.equal(res.statusCode, 200)
  t.equal(res.body, '{"name":"Monstera","tag":"indoor"}')
  t.same(received, [{ id: 9007199254740993n, name: 'Monstera', tag: 'indoor' }])
  t.equal(typeof received[0]?.id, 'bigint')
})

t.test('without a tag the store gets no tag, and the Plant has none', async (t) => {
  const { post, received } = await routeOver(t, async (plant) => ({ kind: 'created', plant }))
  const res = await post('{"id": 2, "name": "Fern"}')
  t.equal(res.statusCode, 200)
  t.equal(res.body, '{"name":"Fern"}')
  t.notOk('tag' in (received[0] ?? {}), 'no tag key at all')
})

t.test('replayed: 200 with the plant the store holds', async (t) => {
  const stored = { id: 3n, name: 'Ivy', tag: 'climber' }
  const { post } = await routeOver(t, async () => ({ kind: 'replayed', plant: stored }))
  const res = await post('{"id": 3, "name": "Ivy", "tag": "climber"}')
  t.equal(res.statusCode, 200)
  t.equal(res.body, '{"name":"Ivy","tag":"climber"}')
})

t.test('conflict: 409 naming the id, in the Error shape', async (t) => {
  const { post } = await routeOver(t, async () => ({ kind: 'conflict', plant: { id: 4n, name: 'Aloe' } }))
  const body = assertErrorShape(t, await post('{"id": 4, "name": "Aloe vera"}'), 409)
  t.equal(body.message, 'A different plant is already stored with id 4')
})

t.test('unavailable: 503 with Retry-After, in the Error shape', async (t) => {
  const { post } = await routeOver(t, async () => { throw new StoreUnavailableError('The database is unavailable') })
  const res = await post('{"id": 5, "name": "Cactus"}')
  assertErrorShape(t, res, 503)
  t.equal(res.headers['retry-after'], String(RETRY_AFTER_SECONDS.databaseUnavailable))
})

t.test('a failure the store did not expect: 500 with a generic message', async (t) => {
  const { post } = await routeOver(t, async () => { throw new Error('a bug with details') })
  const body = assertErrorShape(t, await post('{"id": 6, "name": "Moss"}'), 500)
  t.notMatch(body.message, /details/, 'the details stay in the log')
})

t.test('a string the database cannot hold: 400 naming the field, the store never asked', async (t) => {
  const { post, received } = await routeOver(t, async (plant) => ({ kind: 'created', plant }))
  const nul = assertErrorShape(t, await post('{"id": 7, "name": "a\\u0000b"}'), 400)
  t.match(nul.message, /^body\/name must not contain U\+0000/)
  const surrogate = assertErrorShape(t, await post('{"id": 8, "name": "x", "tag": "\\ud800"}'), 400)
  t.match(surrogate.message, /^body\/tag must not contain/)
  t.same(received, [], 'nothing reached the store')
})
