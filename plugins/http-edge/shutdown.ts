import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { RETRY_AFTER_SECONDS, sendError } from '../error-answers.js'

// In-flight requests get this long to finish after SIGTERM/SIGINT; then the
// connections still open (a slow upload, a stalled client) are closed and the
// process exits 0. Well inside `docker stop`'s default 10 s, so the engine's
// SIGKILL never cuts the drain short; a client that was cut off got no
// answer, so nothing it was told is lost, and it retries (creates are
// idempotent).
export const SHUTDOWN_GRACE_MS = 5_000

// Last resort if closing hangs even with every connection gone (close-with-
// grace then exits 1): still inside the engine's 10 s.
export const SHUTDOWN_HARD_LIMIT_MS = 8_000

// app.close(), bounded: past graceMs the remaining connections are closed so
// the server's close, and then the database's, can finish.
export async function closeWithinGrace (app: FastifyInstance, graceMs = SHUTDOWN_GRACE_MS): Promise<void> {
  const timer = setTimeout(() => {
    app.log.warn({ graceMs }, 'drain bound reached: closing the remaining connections')
    app.server.closeAllConnections()
  }, graceMs)
  try {
    await app.close()
  } finally {
    clearTimeout(timer)
  }
}

// Once close has begun, a request that still arrives on an open keep-alive
// connection is refused in the Error shape, with the request id and
// Connection: close, so the client moves on and the drain ends. Fastify's own
// return503OnClosing answers with a body outside the contract. Returns the
// onRequest hook that refuses.
export function refuseWhileClosing (app: FastifyInstance): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  let closing = false
  app.addHook('preClose', async () => { closing = true })
  return function refuseIfClosing (request, reply, done) {
    if (!closing) return done()
    request.log.info('refused: shutting down')
    reply.header('connection', 'close')
    sendError(reply, 503, 'The service is shutting down; retry later', RETRY_AFTER_SECONDS.shuttingDown)
  }
}
