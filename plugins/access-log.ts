import fp from 'fastify-plugin'
import { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import type { IncomingMessage } from 'node:http'
import type { Level } from 'pino'
import type { AnswerKind } from '../src/store/plant-store.js'
import { genReqId, TRACE_ID_FIELD, traceIdOf } from '../src/request-ids.js'

// The access line: one per answer, once sent, with what an operator searches
// by (docs/operations.md, "Logs") and nothing a caller sent as data.

export const ACCESS_LINE = 'request'

declare module 'fastify' {
  interface FastifyRequest {
    // A create's outcome ('unknown' for a 504), set by the route, and who
    // called, set by auth: for the access line and the metrics.
    createOutcome: AnswerKind | null
    caller: string | null
  }
  interface FastifyContextConfig {
    // The level of the route's access line, info unless set (the probes log at debug).
    accessLogLevel?: Level
  }
}

// Fastify's request lines ("incoming request", "request completed") replaced
// by the one access line, through Fastify's documented LogController.
class AccessLog extends LogController {
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

// Fastify's childLoggerFactory: trace_id bound when the caller sent one.
const childLoggerWithTraceId: NonNullable<FastifyServerOptions['childLoggerFactory']> = function (logger, bindings, opts, rawReq: IncomingMessage) {
  const traceId = traceIdOf(rawReq.headers.traceparent)
  return logger.child(traceId === undefined ? bindings : { ...bindings, [TRACE_ID_FIELD]: traceId }, opts)
}

// The Fastify options that make the request's log lines: fixed when the
// instance is created, so app.ts passes them to Fastify().
export function loggingOptions (logger: FastifyServerOptions['logger']): FastifyServerOptions {
  return { logger, logController: new AccessLog(), genReqId, requestIdHeader: false, childLoggerFactory: childLoggerWithTraceId }
}

// The line's fields for an answer given outside Fastify (malformed HTTP, CONNECT, an unmet Expect).
export function edgeAccessFields (reqId: string, status: number, method?: string): Record<string, unknown> {
  return method === undefined ? { reqId, status } : { reqId, method, route: null, status }
}

// Declared on every request, so each has them from the start (a property
// added later would change the request's shape, and slow every request).
async function accessLog (fastify: FastifyInstance): Promise<void> {
  fastify.decorateRequest('createOutcome', null)
  fastify.decorateRequest('caller', null)
}

export default fp(accessLog, { name: 'access-log', fastify: '5.x' })
