import type { FastifyInstance } from 'fastify'

// In-flight requests get this long after SIGTERM/SIGINT, well inside `docker
// stop`'s 10 s; a client cut off after it got no answer, so it retries
// (creates are idempotent) and nothing it was told is lost.
export const SHUTDOWN_GRACE_MS = 5_000

// Last resort if closing hangs even with every connection gone (close-with-
// grace then exits 1): still inside the engine's 10 s.
export const SHUTDOWN_HARD_LIMIT_MS = 8_000

// app.close(), bounded: past graceMs the remaining connections are closed so
// the server's close, and then the database's, can finish. A request that
// arrives meanwhile is refused (refuseWhileClosing, connection-rules.ts).
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
