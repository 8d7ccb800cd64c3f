import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody, NewPlant, Plant } from '../src/schemas.js'
import { createPlantErrors, createPlantOk } from '../src/answers.js'
import { HttpError } from '../src/http-error.js'
import { requireJson } from '../src/media-type.js'
import { unstorableField } from '../src/storable.js'
import type { PlantRecord } from '../src/store/plant-store.js'

// One Error response per status of the answers table, described by when it
// comes and whether a retry is safe.
const errorResponses = Object.fromEntries(Object.entries(createPlantErrors).map(([status, answer]) =>
  [status, Type.Ref(ErrorBody, { description: `${answer.when} ${answer.retry}` })]
))

const createPlantSchema = {
  operationId: 'createPlant',
  summary: 'Create a plant',
  description: 'Stores a new plant. Safe to retry: a create is idempotent, so sending the same plant again ' +
    '(after a timeout, a lost connection, a 500 or a 503) answers 200 and changes nothing, and a different ' +
    'plant under a stored id is refused with 409, never overwritten.',
  tags: ['plants'],
  body: Type.Ref(NewPlant),
  response: {
    200: Type.Ref(Plant, { description: `${createPlantOk.when} ${createPlantOk.retry}` }),
    ...errorResponses
  }
}

// The Plant reply: exactly name and tag as stored, never the id.
function toPlant (record: PlantRecord): Plant {
  return record.tag === undefined ? { name: record.name } : { name: record.name, tag: record.tag }
}

const plantsRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.post('/plants', {
    schema: createPlantSchema,
    onRequest: async (request) => requireJson(request)
  }, async (request) => {
    const { id, name, tag } = request.body
    const bad = unstorableField({ name, tag })
    if (bad !== undefined) {
      throw new HttpError(400, `body/${bad} must not contain U+0000 or an unpaired UTF-16 surrogate`)
    }
    const outcome = await fastify.store.plants.create({ id: BigInt(id), name, ...(tag === undefined ? {} : { tag }) })
    if (outcome.kind === 'conflict') {
      throw new HttpError(409, `A different plant is already stored with id ${id}`)
    }
    request.log.info({ plantId: String(id), outcome: outcome.kind }, 'plant create')
    return toPlant(outcome.plant)
  })
}

export default plantsRoutes
