import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'

// A second operation, written as docs/architecture.md's "Adding a route" says: this one file, plus its line in the
// API's route list (test/api/second-route.test.ts adds it). It says what it answers itself; the plugins that guard
// it (auth, the JSON body, the rate limit) add the rest.

const PlantName = Type.Object({ name: Type.String({ minLength: 1 }) }, { examples: [{ name: 'Monstera' }] })

const schema = {
  operationId: 'checkPlantName',
  summary: 'Check a plant name',
  tags: ['plants'],
  body: PlantName,
  response: { 200: Type.Object({ name: Type.String(), letters: Type.Integer() }) }
}

const answers = {
  200: {
    when: 'The name is a plant name; its letters are counted.',
    retry: 'Nothing is stored, so sending it again is safe.',
    example: { name: 'Monstera', letters: 8 }
  }
}

const plantNamesRoute: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.post('/plant-names', { schema, config: { answers } }, async (request) => {
    const { name } = request.body
    return { name, letters: [...name].length }
  })
}

export default fp(plantNamesRoute, { name: 'plant-names-route', fastify: '5.x', dependencies: ['auth', 'json-body'], encapsulate: true })
