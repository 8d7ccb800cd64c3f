import { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import type { Level } from 'pino'
import type { AnswerKind } from '../../src/store/plant-store.js'

// The access log: one line per answer, once sent, with what an operator
// searches by and nothing a caller sent as data (no body, headers or token).
// Answers given outside Fastify (malformed HTTP, an unmet Expect) write a
// line of the same shape (edgeAccessFields).

export const ACCESS_LINE = 'request'

// A create's outcome; 'unknown' is a 504's (the error policy notes it).
type Outcome = AnswerKind

declare module 'fastify' {
  interface FastifyRequest {
    // A create's outcome (noteOutcome) and who called (noteCaller), for the
    // access line.
    createOutcome: Outcome | null
    caller: string | null
  }
  interface FastifyContextConfig {
    // The level of the route's access line, info unless set (the health
    // probes log theirs at debug).
    accessLogLevel?: Level
  }
}

// Declared on every request, so each has them from the start (a property
// added later would change the request's shape, and slow every request).
export function declareAccessLogFields (fastify: FastifyInstance): void {
  fastify.decorateRequest('createOutcome', null)
  fastify.decorateRequest('caller', null)
}

// A create's outcome, noted by the route.
export function noteOutcome (request: FastifyRequest, outcome: Outcome): void {
  request.createOutcome = outcome
}

// The caller's name, noted by the bearer hook (never the token).
export function noteCaller (request: FastifyRequest, name: string): void {
  request.caller = name
}

// The fields of an access line for an answer given outside Fastify.
export function edgeAccessFields (reqId: string, status: number, method?: string): Record<string, unknown> {
  return method === undefined ? { reqId, status } : { reqId, method, route: null, status }
}

interface AccessFields {
  method: string
  route: string | null
  status: number
  durationMs: number
  caller?: string
  outcome?: Outcome
}

// Fastify's request lines ("incoming request", "request completed") replaced
// by the one access line, through Fastify's documented LogController.
export class AccessLog extends LogController {
  override incomingRequest (): void {}

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // routeOptions builds an object on every read: read once.
    const { url, config } = request.routeOptions
    const fields: AccessFields = {
      method: request.method,
      route: url ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100
    }
    if (request.caller !== null) fields.caller = request.caller
    if (request.createOutcome !== null) fields.outcome = request.createOutcome
    if (error != null) request.log.error({ ...fields, err: error }, ACCESS_LINE)
    else request.log[config.accessLogLevel ?? 'info'](fields, ACCESS_LINE)
  }
}
