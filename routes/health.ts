import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody } from '../src/schemas.js'
import { HttpError } from '../src/http/errors.js'

const Status = Type.Object({ status: Type.String() })

// Public probes for orchestrators: live while the process runs, ready while
// the database answers and the schema is migrated.
const healthRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get('/health/live', {
    schema: { hide: true, response: { 200: Status } }
  }, async () => ({ status: 'ok' }))

  fastify.get('/health/ready', {
    schema: { hide: true, response: { 200: Status, 503: Type.Ref(ErrorBody) } }
  }, async () => {
    if (!(await fastify.plants.isReady())) throw new HttpError(503, 'The database is not ready')
    return { status: 'ready' }
  })
}

export default fp(healthRoutes, { name: 'health-routes', fastify: '5.x', dependencies: ['db'], encapsulate: true })
