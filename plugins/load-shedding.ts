import fp from 'fastify-plugin'
import underPressure from '@fastify/under-pressure'
import { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
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
// A body this share of BODY_LIMIT or smaller costs less than the request
// around it: it is never weighed (the loop's delay guards against a flood).
const SMALL_BODY_SHARE = 256
// A large body weighs what it declared while it is young (its bytes may all
// be on the way) or while it arrives at a pace that can bring it whole before
// the server's request timeout. Past that it will never be parsed (the
// timeout answers 408 first), so only the bytes that arrived weigh: a slow
// upload holds memory, not the loop.
const YOUNG_MS = 3000
// The pace that counts as arriving when the server sets no request timeout, in bytes a second.
const MIN_PACE = 1024
// The loop's mean delay over a sample past which it is late: well below the
// probes' second, above a busy machine's momentary stall (the mean dilutes it).
const MAX_EVENT_LOOP_DELAY_MS = 250
const SAMPLE_INTERVAL_MS = 200
const LATE_READINGS = 3
// The share of a sample the loop spent working past which it is saturated
// (see loopReadings), and the share below which it no longer is.
const SATURATED = 0.9
const UNSATURATED = 0.5
// A body this large costs the loop milliseconds to read, store and answer:
// while the loop is saturated such bodies are taken one at a time. Smaller
// ones, whatever BODY_LIMIT is, never meet that rule.
const COSTLY_BODY = 64 * 1024

interface Body { declared: number, since: number, socket: Socket | undefined, bytesAtStart: number }

async function loadShedding (fastify: FastifyInstance, opts: LoadSheddingOptions): Promise<void> {
  const { bodyLimit, maxEventLoopDelayMs = MAX_EVENT_LOOP_DELAY_MS } = opts
  const loop = await loopReadings(fastify, maxEventLoopDelayMs)
  const bodies = new Set<Body>()
  const smallBody = bodyLimit / SMALL_BODY_SHARE
  let lastAdmitted = -Infinity
  let lastRefused = -Infinity

  fastify.addHook('onRequest', (request, reply, done) => {
    const size = bodySize(request, bodyLimit)
    const large = size > smallBody
    let full = false
    let oneAtATime = false
    if (large) {
      const inFlight = weighBodies(bodies, fastify.server.requestTimeout)
      const now = performance.now()
      // One body is always admitted, however large: the budget holds several.
      // A saturated loop takes costly bodies one at a time and, while others
      // are being refused, one a sample at most, so it has turns to accept
      // waiting connections; a client sending one after another is never refused.
      oneAtATime = loop.saturated && size >= COSTLY_BODY
      const budget = oneAtATime ? bodyLimit : BODIES_IN_FLIGHT * bodyLimit
      const paced = oneAtATime && now - lastAdmitted < SAMPLE_INTERVAL_MS && now - lastRefused < SAMPLE_INTERVAL_MS
      full = paced || (inFlight > 0 && inFlight + size > budget)
      if (full && oneAtATime) lastRefused = now
    }
    if (loop.behind || full) {
      const why = loop.behind ? 'the event loop is behind' : 'too many request bodies are in progress'
      done(new HttpError(503, `The service is overloaded (${why}); retry after the Retry-After delay`, retryAfter(RETRY_AFTER_SECONDS.overloaded)))
      return
    }
    if (large) {
      const socket = request.raw.socket instanceof Socket ? request.raw.socket : undefined
      const body = { declared: size, since: performance.now(), socket, bytesAtStart: socket?.bytesRead ?? 0 }
      bodies.add(body)
      if (oneAtATime) lastAdmitted = body.since
      reply.raw.once('close', () => { bodies.delete(body) })
    }
    done()
  })
}

// The loop's two readings, every SAMPLE_INTERVAL_MS. Behind: late only after
// LATE_READINGS late readings in a row, as a long turn or two (a large body,
// start-up) are over by the time they are measured. Saturated: busy nearly
// all of a sample, and so until a sample finds it idle half the time (a burst
// whose sender is slow leaves the loop short waits, which end nothing).
// Node accepts one waiting connection per turn of the loop, so while a
// burst's connections wait, every large body admitted lengthens the turns,
// the burst lasts longer and yet more bodies are admitted; a probe's
// connection waits behind them all.
async function loopReadings (fastify: FastifyInstance, maxEventLoopDelayMs: number): Promise<{ behind: boolean, saturated: boolean }> {
  // Only its sampler: with no threshold given it adds no hook, and the
  // decision (with an Error-shaped answer) is made here.
  await fastify.register(underPressure, { sampleInterval: SAMPLE_INTERVAL_MS })
  const readings = { behind: false, saturated: false }
  let reading: NodeJS.Timeout | undefined
  fastify.addHook('onReady', async () => {
    let late = 0
    let last = performance.eventLoopUtilization()
    reading = setInterval(() => {
      late = fastify.memoryUsage().eventLoopDelay > maxEventLoopDelayMs ? late + 1 : 0
      readings.behind = late >= LATE_READINGS
      const now = performance.eventLoopUtilization()
      const utilization = performance.eventLoopUtilization(now, last).utilization
      readings.saturated = utilization >= (readings.saturated ? UNSATURATED : SATURATED)
      last = now
    }, SAMPLE_INTERVAL_MS).unref()
  })
  fastify.addHook('onClose', async () => { clearInterval(reading) })
  return readings
}

// The bytes the large bodies in progress weigh now (see YOUNG_MS), given the
// server's request timeout (0: none).
function weighBodies (bodies: Set<Body>, timeoutMs: number): number {
  const now = performance.now()
  let bytes = 0
  for (const body of bodies) {
    const elapsed = now - body.since
    // A stand-in socket (app.inject) tells no bytes: its body weighs what it declared.
    if (elapsed < YOUNG_MS || body.socket === undefined) {
      bytes += body.declared
      continue
    }
    const arrived = Math.min(body.declared, body.socket.bytesRead - body.bytesAtStart)
    const pace = timeoutMs > 0 ? body.declared / timeoutMs * 1000 : MIN_PACE
    bytes += arrived * 1000 >= pace * elapsed ? body.declared : arrived
  }
  return bytes
}

// The bytes a request's body will hold: its Content-Length (a larger one than
// BODY_LIMIT is refused 413 unread), BODY_LIMIT when chunked, 0 when it has none.
function bodySize (request: FastifyRequest, bodyLimit: number): number {
  const length = request.headers['content-length']
  if (length !== undefined) return Math.min(Number(length), bodyLimit)
  return request.headers['transfer-encoding'] === undefined ? 0 : bodyLimit
}

export default fp(loadShedding, { name: 'load-shedding', fastify: '5.x' })
