import fp from 'fastify-plugin'
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody } from '../src/schemas.js'
import { RETRY_AFTER_SECONDS, sendError } from '../plugins/http-edge/error-answers.js'

const Status = Type.Object({ status: Type.String() })

const PROBES = new Set(['/health/live', '/health/ready'])
// Engines and balancers probe every few seconds per replica: at info their
// access lines would bury the requests that matter, so they log at debug
// (plugins/http-edge/access-log.ts).
export const isProbeRoute = (route: string | undefined): boolean => route !== undefined && PROBES.has(route)

// Public probes for orchestrators: live while the process runs, ready while
// the schema is migrated and the database accepts writes (a standby or a
// read-only database is not ready), answered within a probe's second.
const healthRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get('/health/live', {
    schema: { hide: true, response: { 200: Status } }
  }, async () => ({ status: 'ok' }))

  // Not ready is an expected state (start-up, migrations, an outage another
  // log line reports), answered directly rather than thrown: no error log,
  // no stack trace every few seconds.
  fastify.get('/health/ready', {
    schema: { hide: true, response: { 200: Status, 503: Type.Ref(ErrorBody) } }
  }, async (request, reply) => {
    if (await fastify.plants.isReady()) return { status: 'ready' }
    request.log.debug({ migrated: fastify.plants.isMigrated() }, 'not ready')
    return await sendError(reply, 503, 'The database is not ready', RETRY_AFTER_SECONDS.databaseUnavailable)
  })
}

export default fp(healthRoutes, { name: 'health-routes', fastify: '5.x', dependencies: ['db'], encapsulate: true })
