import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { NewPlant, Plant } from '../src/schemas.js'
import { STORE_WRITE_ANSWERS } from '../src/documented-answers.js'
import { HttpError } from '../src/http-error.js'

// POST /plants, the one operation. What runs before the handler: docs/architecture.md, "A request's path".

const schema = {
  operationId: 'createPlant',
  summary: 'Create a plant',
  description: 'Stores a new plant. Safe to retry: a create is idempotent, so sending the same plant again ' +
    '(after a timeout, a lost connection, a 500, a 503 or a 504) answers 200 and changes nothing, and a different ' +
    'plant under a stored id is refused with 409, never overwritten.',
  tags: ['plants'],
  body: Type.Ref(NewPlant),
  // The response schema writes exactly name and tag as stored, never the id.
  response: { 200: Type.Ref(Plant) }
}

// What this route answers itself. The plugins that guard it add theirs (auth, the JSON body, the rate limit).
const answers = {
  ...STORE_WRITE_ANSWERS,
  200: {
    when: 'The plant is stored: newly, or it was already stored with the same name and tag (a replay changes nothing).',
    retry: 'Sending the same plant again is safe and answers 200 again.',
    example: { name: 'Monstera', tag: 'indoor' }
  },
  409: {
    when: 'A different plant (another name or tag) is already stored under this id; nothing was overwritten.',
    retry: 'Retrying answers 409 again: send the plant under another id.',
    message: 'A different plant is already stored with id 1'
  }
}

const plantsRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.post('/plants', { schema, config: { answers } }, async function createPlant (request) {
    const { id, name, tag } = request.body
    const outcome = await fastify.plants.create(tag === undefined ? { id: BigInt(id), name } : { id: BigInt(id), name, tag })
    // The access line never holds the plant's id or data, only this.
    request.createOutcome = outcome.kind
    if (outcome.kind === 'conflict') throw new HttpError(409, `A different plant is already stored with id ${id}`)
    return outcome.plant
  })
}

// Encapsulated (its own context, under auth's); the metadata only declares what it needs.
export default fp(plantsRoutes, { name: 'plants-routes', fastify: '5.x', dependencies: ['db', 'auth', 'json-body'], encapsulate: true })
