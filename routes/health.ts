import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody } from '../src/schemas.js'
import { errorBody, RETRY_AFTER_SECONDS, retryAfter } from '../src/http-error.js'

const Status = Type.Object({ status: Type.String() })

// Probed every few seconds per replica: at info their access lines would bury the requests that matter.
const config = { accessLogLevel: 'debug' } as const

// Public probes for orchestrators; what ready means: docs/operations.md, "Health".
const healthRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get('/health/live', { config, schema: { hide: true, response: { 200: Status } } }, async () => ({ status: 'ok' }))

  // Not ready is expected (start-up, an outage another line reports): answered, not thrown, so no error log and stack.
  const schema = { hide: true, response: { 200: Status, 503: Type.Ref(ErrorBody) } }
  fastify.get('/health/ready', { config, schema }, async (request, reply) => {
    if (await fastify.plants.isReady()) return { status: 'ready' }
    request.log.debug({ migrated: fastify.plants.isMigrated() }, 'not ready')
    return await reply.code(503).headers(retryAfter(RETRY_AFTER_SECONDS.databaseUnavailable)).send(errorBody(503, 'The database is not ready'))
  })
}

export default fp(healthRoutes, { name: 'health-routes', fastify: '5.x', dependencies: ['db'], encapsulate: true })
