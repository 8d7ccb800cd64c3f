import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody, NewPlant, Plant } from '../src/schemas.js'
import { createPlantErrors, createPlantOk, type Answer } from '../src/answers.js'
import { HttpError } from '../src/http-error.js'

// What the service is configured with: the document lists every status the route can answer, and none it cannot.
export interface PlantsRoutesOptions { configured: ReadonlyArray<NonNullable<Answer['onlyWith']>> }

const createPlantSchema = ({ configured }: PlantsRoutesOptions) => ({
  operationId: 'createPlant',
  summary: 'Create a plant',
  description: 'Stores a new plant. Safe to retry: a create is idempotent, so sending the same plant again ' +
    '(after a timeout, a lost connection, a 500, a 503 or a 504) answers 200 and changes nothing, and a different ' +
    'plant under a stored id is refused with 409, never overwritten.',
  tags: ['plants'],
  body: Type.Ref(NewPlant),
  response: {
    200: Type.Ref(Plant, { description: `${createPlantOk.when} ${createPlantOk.retry}` }),
    ...Object.fromEntries(Object.entries(createPlantErrors as Record<string, Answer>)
      .filter(([, answer]) => answer.onlyWith === undefined || configured.includes(answer.onlyWith))
      .map(([status, answer]) => [status, Type.Ref(ErrorBody, { description: `${answer.when} ${answer.retry}` })]))
  }
})

// What runs before it: docs/architecture.md, "A request's path". The media type check runs after auth, before the body.
const plantsRoutes: FastifyPluginAsyncTypebox<PlantsRoutesOptions> = async (fastify, opts) => {
  fastify.post('/plants', { schema: createPlantSchema(opts), onRequest: fastify.requireJsonBody }, async function createPlant (request) {
    const { id, name, tag } = request.body
    const outcome = await fastify.plants.create(tag === undefined ? { id: BigInt(id), name } : { id: BigInt(id), name, tag })
    // The access line never holds the plant's id or data, only this.
    request.createOutcome = outcome.kind
    if (outcome.kind === 'conflict') throw new HttpError(409, `A different plant is already stored with id ${id}`)
    // The response schema (Plant) writes exactly name and tag as stored, never the id.
    return outcome.plant
  })
}

// Encapsulated (its own context, under auth's); the metadata only declares what it needs.
export default fp(plantsRoutes, { name: 'plants-routes', fastify: '5.x', dependencies: ['db', 'auth', 'json-body'], encapsulate: true })
