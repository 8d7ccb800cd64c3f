import fp from 'fastify-plugin'
import underPressure from '@fastify/under-pressure'
import { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpError, RETRY_AFTER_SECONDS, retryAfter } from '../src/http-error.js'

// Overload is answered 503 before a body is read, so that /health/live keeps its second. Only what has been measured
// decides, never what a request's head promises: the event loop's utilisation, the bytes of bodies that have
// arrived, and the large bodies arriving fast (docs/operations.md, "Limits and timeouts", says why each is there).
// Requests of app.inject have no connection and no bytes to count: no rule applies to them.

// The loop is saturated when busy this share of a sample. It then takes large bodies from one client at a time, and
// small ones always: their 503 would cost the loop about what they do.
const MAX_EVENT_LOOP_UTILIZATION = 0.9
const SAMPLE_INTERVAL_MS = 100
// A body this large costs the loop milliseconds to read, parse and answer.
const LARGE_BODY = 64 * 1024
// The bytes of bodies held at once, in bodies of BODY_LIMIT: twice what four slow uploads can hold.
const BODIES_HELD = 8
// Large bodies arriving at BODY_LIMIT a second or faster, at once: a burst arrives before the next sample shows it.
const ARRIVING_AT_ONCE = 2
// A body that declares this share of BODY_LIMIT or less is not counted: Fastify holds it to what it declared.
const SMALL_BODY_SHARE = 256

const overloaded = (why: string): HttpError =>
  new HttpError(503, `The service is overloaded (${why}); retry after the Retry-After delay`, retryAfter(RETRY_AFTER_SECONDS.overloaded))

// The length a request's body declares: undefined when it is sent chunked, 0 when it has none.
function declaredLength (request: FastifyRequest): number | undefined {
  const length = request.headers['content-length']
  if (length !== undefined) return Number(length)
  return request.headers['transfer-encoding'] === undefined ? 0 : undefined
}

async function loadShedding (fastify: FastifyInstance, { bodyLimit }: { bodyLimit: number }): Promise<void> {
  const bodies = bodiesInProgress(bodyLimit)
  // A body that may be large: one declaring LARGE_BODY or more (more than BODY_LIMIT is answered 413 unread, and
  // costs nothing), or a chunked one, whose length is unknown until its bytes arrive.
  const mayBeLarge = (length: number | undefined): boolean => length === undefined || (length >= LARGE_BODY && length <= bodyLimit)
  // Whether a body that may be large was refused since the last one was taken: other clients are competing for it.
  let refusedSinceTaken = false
  const refuse = (why: string): HttpError => {
    refusedSinceTaken = true
    return overloaded(why)
  }
  await fastify.register(underPressure, {
    sampleInterval: SAMPLE_INTERVAL_MS,
    maxEventLoopUtilization: MAX_EVENT_LOOP_UTILIZATION,
    // The share of the last sample, not of the whole life of the process.
    eventLoopUtilizationMode: 'interval',
    // Called only while the loop is saturated: a rejection is the answer, nothing returned admits the request. A
    // body that may be large is taken only while no large body arrives and none was refused since the last was
    // taken: a client sending one after another is taken in turn, a burst is not (until the loop has time again).
    pressureHandler: (request) => {
      if (!(request.raw.socket instanceof Socket) || !mayBeLarge(declaredLength(request))) return
      const competing = refusedSinceTaken || bodies.arrivingFast() > 0
      return competing ? Promise.reject(refuse('the event loop is saturated')) : undefined
    }
  })
  fastify.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket
    const length = declaredLength(request)
    // A small body is held to what it declared; one declaring more than BODY_LIMIT is answered 413 unread.
    const uncounted = length !== undefined && (length <= bodyLimit / SMALL_BODY_SHARE || length > bodyLimit)
    if (!(socket instanceof Socket) || uncounted) return done()
    if (bodies.bytesHeld() >= BODIES_HELD * bodyLimit) return done(overloaded('too many request bodies are in progress'))
    if (mayBeLarge(length)) {
      if (bodies.arrivingFast() >= ARRIVING_AT_ONCE) return done(refuse('too many large request bodies are arriving'))
      refusedSinceTaken = false
    }
    bodies.add(socket, reply.raw)
    done()
  })
}

// The bodies in progress, each measured by the bytes its connection has read since its request was admitted (a
// public counter of the socket), up to BODY_LIMIT. The counter is read only when a request is weighed, so no chunk
// costs anything as it arrives. The first read of a body (up to 64 KiB) may have come with its head, before it was
// admitted: that much goes uncounted. A body leaves when its answer has been sent or its connection closed.
interface Body { socket: Socket, from: number, since: number }

function bodiesInProgress (bodyLimit: number) {
  const bodies = new Set<Body>()
  const arrived = (body: Body): number => Math.min(body.socket.bytesRead - body.from, bodyLimit)
  return {
    add (socket: Socket, res: NodeJS.EventEmitter): void {
      const body = { socket, from: socket.bytesRead, since: performance.now() }
      bodies.add(body)
      res.once('close', () => { bodies.delete(body) })
    },
    bytesHeld: (): number => [...bodies].reduce((bytes, body) => bytes + arrived(body), 0),
    // Large bodies whose bytes came at BODY_LIMIT a second or faster since they were admitted: a slow upload never
    // counts, however much it declared or has sent by now.
    arrivingFast (): number {
      const now = performance.now()
      const fast = (body: Body): boolean => arrived(body) >= LARGE_BODY && arrived(body) * 1000 >= bodyLimit * (now - body.since)
      return [...bodies].filter(fast).length
    }
  }
}

export default fp(loadShedding, { name: 'load-shedding', fastify: '5.x' })
