import type { FastifyInstance } from 'fastify'
import { RETRY_AFTER_SECONDS, sendError } from './errors.js'

// In-flight requests get this long to finish after SIGTERM/SIGINT before the
// process exits anyway. docker-compose.yml's stop_grace_period must exceed
// it, or the engine's SIGKILL cuts the drain short.
export const SHUTDOWN_GRACE_MS = 10_000

// Once close has begun, a request that still arrives on an open keep-alive
// connection is refused in the Error shape, with the request id and
// Connection: close, so the client moves on and the drain ends. Fastify's own
// return503OnClosing answers with a body outside the contract.
export function refuseWhileClosing (app: FastifyInstance): void {
  let closing = false
  app.addHook('preClose', async () => { closing = true })
  app.addHook('onRequest', async (request, reply) => {
    if (!closing) return
    request.log.info('refused: shutting down')
    reply.header('connection', 'close')
    return sendError(reply, 503, 'The service is shutting down; retry later', RETRY_AFTER_SECONDS.shuttingDown)
  })
}
