import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody, NewPlant, Plant } from '../src/schemas.js'
import { createPlantErrors, createPlantOk } from '../src/answers.js'
import { HttpError } from '../plugins/error-answers.js'
import { requireJson } from '../plugins/json-body/index.js'
import { unstorableField } from '../plugins/json-body/validation.js'
import { noteOutcome } from '../plugins/logging/access-log.js'

// One Error response per status of the answers table, described by when it
// comes and whether a retry is safe.
const errorResponses = Object.fromEntries(Object.entries(createPlantErrors).map(([status, answer]) =>
  [status, Type.Ref(ErrorBody, { description: `${answer.when} ${answer.retry}` })]
))

const createPlantSchema = {
  operationId: 'createPlant',
  summary: 'Create a plant',
  description: 'Stores a new plant. Safe to retry: a create is idempotent, so sending the same plant again ' +
    '(after a timeout, a lost connection, a 500, a 503 or a 504) answers 200 and changes nothing, and a different ' +
    'plant under a stored id is refused with 409, never overwritten.',
  tags: ['plants'],
  body: Type.Ref(NewPlant),
  response: {
    200: Type.Ref(Plant, { description: `${createPlantOk.when} ${createPlantOk.retry}` }),
    ...errorResponses
  }
}

// POST /plants; what runs before it: docs/architecture.md, "A request's path".
// The media type is checked in the route's own onRequest: after auth (the
// context's hooks run first) and before a byte of the body is read.
const plantsRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.post('/plants', {
    schema: createPlantSchema,
    onRequest: async (request) => requireJson(request)
  }, async function createPlant (request) {
    const { id, name, tag } = request.body
    const bad = unstorableField(request.body)
    if (bad !== undefined) throw new HttpError(400, `body/${bad} must not contain U+0000 or an unpaired UTF-16 surrogate`)
    // A store that cannot answer throws: 503, or 504 for an unconfirmed write.
    const outcome = await fastify.plants.create(tag === undefined ? { id: BigInt(id), name } : { id: BigInt(id), name, tag })
    // The access line never holds the plant's id or data, only this.
    noteOutcome(request, outcome.kind)
    if (outcome.kind === 'conflict') throw new HttpError(409, `A different plant is already stored with id ${id}`)
    // The Plant reply: exactly name and tag as stored, never the id.
    const plant = outcome.plant
    return plant.tag === undefined ? { name: plant.name } : { name: plant.name, tag: plant.tag }
  })
}

// Kept encapsulated (its own context, under auth's); the metadata only
// declares what it needs.
export default fp(plantsRoutes, { name: 'plants-routes', fastify: '5.x', dependencies: ['db', 'auth'], encapsulate: true })
