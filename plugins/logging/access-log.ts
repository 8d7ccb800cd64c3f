import { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import type { Level } from 'pino'
import type { AnswerKind } from '../../src/store/plant-store.js'

// The access line: one per answer, once sent, with what an operator searches
// by (docs/operations.md, "Logs") and nothing a caller sent as data.

export const ACCESS_LINE = 'request'

declare module 'fastify' {
  interface FastifyRequest {
    // A create's outcome ('unknown' for a 504) and who called, for the access line.
    createOutcome: AnswerKind | null
    caller: string | null
  }
  interface FastifyContextConfig {
    // The level of the route's access line, info unless set (the probes log at debug).
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
export function noteOutcome (request: FastifyRequest, outcome: AnswerKind): void {
  request.createOutcome = outcome
}

// The caller's name, noted by the bearer hook (never the token).
export function noteCaller (request: FastifyRequest, name: string): void {
  request.caller = name
}

// The line's fields for an answer given outside Fastify (malformed HTTP, an unmet Expect).
export function edgeAccessFields (reqId: string, status: number, method?: string): Record<string, unknown> {
  return method === undefined ? { reqId, status } : { reqId, method, route: null, status }
}

// Fastify's request lines ("incoming request", "request completed") replaced
// by the one access line, through Fastify's documented LogController.
export class AccessLog extends LogController {
  override incomingRequest (): void {}

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // routeOptions builds an object on every read: read once.
    const { url, config } = request.routeOptions
    const { method, caller, createOutcome: outcome } = request
    const fields = {
      method,
      route: url ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
      ...(caller === null ? {} : { caller }),
      ...(outcome === null ? {} : { outcome })
    }
    if (error != null) request.log.error({ ...fields, err: error }, ACCESS_LINE)
    else request.log[config.accessLogLevel ?? 'info'](fields, ACCESS_LINE)
  }
}
