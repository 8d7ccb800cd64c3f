import fp from 'fastify-plugin'
import underPressure from '@fastify/under-pressure'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpError, RETRY_AFTER_SECONDS, retryAfter } from '../src/http-error.js'

export interface LoadSheddingOptions {
  // BODY_LIMIT: the largest body one request may send.
  bodyLimit: number
  // Tests lower it to see the loop's delay shed requests.
  maxEventLoopDelayMs?: number
}

// Overload is answered 503 before its body is read, so /health/live still
// answers within its second (docs/architecture.md, "A request's path", step 4).
// Bodies count until their answer is sent: storing and answering cost the loop too.

// Creates of BODY_LIMIT that may be in progress at once: a few keep the
// loop's turns well under the probes' second on 2 busy cores.
const BODIES_IN_FLIGHT = 4
// The loop's mean delay over a sample past which it is late: well below the
// probes' second, above a busy machine's momentary stall (the mean dilutes it).
const MAX_EVENT_LOOP_DELAY_MS = 250
const SAMPLE_INTERVAL_MS = 200
const LATE_READINGS = 3

async function loadShedding (fastify: FastifyInstance, opts: LoadSheddingOptions): Promise<void> {
  const { bodyLimit, maxEventLoopDelayMs = MAX_EVENT_LOOP_DELAY_MS } = opts
  // Only its sampler: with no threshold given it adds no hook, and the
  // decision (with an Error-shaped answer) is made here.
  await fastify.register(underPressure, { sampleInterval: SAMPLE_INTERVAL_MS })
  // Behind only after LATE_READINGS late readings in a row: a long turn or
  // two (a large body, start-up) are over by the time they are measured.
  let behind = false
  let reading: NodeJS.Timeout | undefined
  fastify.addHook('onReady', async () => {
    let late = 0
    reading = setInterval(() => {
      late = fastify.memoryUsage().eventLoopDelay > maxEventLoopDelayMs ? late + 1 : 0
      behind = late >= LATE_READINGS
    }, SAMPLE_INTERVAL_MS).unref()
  })
  fastify.addHook('onClose', async () => { clearInterval(reading) })
  const budget = BODIES_IN_FLIGHT * bodyLimit
  let inFlight = 0

  fastify.addHook('onRequest', (request, reply, done) => {
    const size = bodySize(request, bodyLimit)
    // One body is always admitted, however large: the budget holds several.
    const full = inFlight > 0 && size > 0 && inFlight + size > budget
    if (behind || full) {
      const why = behind ? 'the event loop is behind' : 'too many request bodies are in progress'
      done(new HttpError(503, `The service is overloaded (${why}); retry after the Retry-After delay`, retryAfter(RETRY_AFTER_SECONDS.overloaded)))
      return
    }
    if (size > 0) {
      inFlight += size
      reply.raw.once('close', () => { inFlight -= size })
    }
    done()
  })
}

// The bytes a request's body will hold: its Content-Length (a larger one than
// BODY_LIMIT is refused 413 unread), BODY_LIMIT when chunked, 0 when it has none.
function bodySize (request: FastifyRequest, bodyLimit: number): number {
  const length = request.headers['content-length']
  if (length !== undefined) return Math.min(Number(length), bodyLimit)
  return request.headers['transfer-encoding'] === undefined ? 0 : bodyLimit
}

export default fp(loadShedding, { name: 'load-shedding', fastify: '5.x' })
