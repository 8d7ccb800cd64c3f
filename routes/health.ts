import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody } from '../src/schemas.js'
import { RETRY_AFTER_SECONDS, sendError } from '../plugins/error-answers.js'

const Status = Type.Object({ status: Type.String() })

// Probed every few seconds per replica: at info their access lines would bury
// the requests that matter.
const config = { accessLogLevel: 'debug' } as const

// Public probes for orchestrators: live while the process runs, ready while a
// write can commit now (docs/operations.md, Health).
const healthRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get('/health/live', { config, schema: { hide: true, response: { 200: Status } } }, async () => ({ status: 'ok' }))

  // Not ready is an expected state (start-up, migrations, an outage another
  // log line reports), answered directly rather than thrown: no error log,
  // no stack trace every few seconds.
  fastify.get('/health/ready', {
    config,
    schema: { hide: true, response: { 200: Status, 503: Type.Ref(ErrorBody) } }
  }, async (request, reply) => {
    if (await fastify.plants.isReady()) return { status: 'ready' }
    request.log.debug({ migrated: fastify.plants.isMigrated() }, 'not ready')
    return await sendError(reply, 503, 'The database is not ready', RETRY_AFTER_SECONDS.databaseUnavailable)
  })
}

export default fp(healthRoutes, { name: 'health-routes', fastify: '5.x', dependencies: ['db'], encapsulate: true })
