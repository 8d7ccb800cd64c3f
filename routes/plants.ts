import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody, NewPlant, Plant } from '../src/schemas.js'
import { HttpError } from '../src/http/errors.js'
import { requireJson } from '../src/body/media-type.js'
import { unstorableField } from '../src/body/validation.js'
import type { PlantRecord } from '../src/store/plant-store.js'

const errorResponse = (description: string) => Type.Ref(ErrorBody, { description })

const createPlantSchema = {
  operationId: 'createPlant',
  summary: 'Create a plant',
  description: 'Creates a new plant in the store. Retrying the same plant is safe: it answers 200 again and changes nothing.',
  tags: ['plants'],
  body: Type.Ref(NewPlant),
  response: {
    200: Type.Ref(Plant, { description: 'The created plant (or the same plant, already stored)' }),
    400: errorResponse('Unexpected error: the body is not valid JSON or not a valid NewPlant'),
    401: errorResponse('No bearer token, or one that is not accepted'),
    409: errorResponse('A different plant is already stored under this id; nothing was changed'),
    413: errorResponse('The body is larger than the configured limit'),
    415: errorResponse('The Content-Type is not application/json'),
    500: errorResponse('An unexpected failure; details are in the service log'),
    503: errorResponse('The database is unavailable or too slow; retry after the Retry-After delay')
  }
}

// The Plant reply: exactly name and tag as stored, never the id.
function toPlant (record: PlantRecord): Plant {
  return record.tag === undefined ? { name: record.name } : { name: record.name, tag: record.tag }
}

// POST /plants, in the contract's order. Before this handler runs: the bearer
// check (plugins/auth.ts, onRequest), the media type (requireJson, onRequest),
// the body (src/body/json.ts) and NewPlant validation (src/body/validation.ts,
// ids by the int64 rule in src/body/int64.ts). Here: strings the database
// cannot hold exactly, then the store (src/store/plant-store.ts), whose
// outcome is the answer: created or replayed 200, conflict 409; a store that
// is unavailable throws, and the error handler answers 503.
const plantsRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.post('/plants', {
    schema: createPlantSchema,
    onRequest: async (request) => requireJson(request)
  }, async function createPlant (request) {
    const { id, name, tag } = request.body
    const bad = unstorableField({ name, tag })
    if (bad !== undefined) {
      throw new HttpError(400, `body/${bad} must not contain U+0000 or an unpaired UTF-16 surrogate`)
    }
    const outcome = await fastify.plants.create({ id: BigInt(id), name, ...(tag === undefined ? {} : { tag }) })
    if (outcome.kind === 'conflict') {
      throw new HttpError(409, `A different plant is already stored with id ${id}`)
    }
    request.log.info({ plantId: String(id), outcome: outcome.kind }, 'plant create')
    return toPlant(outcome.plant)
  })
}

// Kept encapsulated (its own context, under auth's); the metadata only
// declares what it needs.
export default fp(plantsRoutes, { name: 'plants-routes', fastify: '5.x', dependencies: ['db', 'auth'], encapsulate: true })
