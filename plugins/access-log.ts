import fp from 'fastify-plugin'
import { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import type { IncomingMessage } from 'node:http'
import type { Level } from 'pino'
import type { AnswerKind } from '../src/store/plant-store.js'
import { genReqId, TRACE_ID_FIELD, traceIdOf } from '../src/request-ids.js'

// One access line per answer, once sent, with what an operator searches by (docs/operations.md, "Logs") and nothing
// a caller sent as data.

export const ACCESS_LINE = 'request'

declare module 'fastify' {
  interface FastifyRequest {
    // For the access line and the metrics: set by the route ('unknown' for a 504), and by auth.
    createOutcome: AnswerKind | null
    caller: string | null
  }
  interface FastifyContextConfig {
    accessLogLevel?: Level // info unless set
  }
}

// Fastify's two request lines replaced by the one, through its documented LogController.
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

// trace_id bound when the caller sent one.
const childLoggerWithTraceId: NonNullable<FastifyServerOptions['childLoggerFactory']> = function (logger, bindings, opts, rawReq: IncomingMessage) {
  const traceId = traceIdOf(rawReq.headers.traceparent)
  return logger.child(traceId === undefined ? bindings : { ...bindings, [TRACE_ID_FIELD]: traceId }, opts)
}

// Fixed when the instance is created, so app.ts passes them to Fastify().
export function loggingOptions (logger: FastifyServerOptions['logger']): FastifyServerOptions {
  return { logger, logController: new AccessLog(), genReqId, requestIdHeader: false, childLoggerFactory: childLoggerWithTraceId }
}

// The line's fields for an answer given outside Fastify (malformed HTTP, CONNECT, an unmet Expect).
export function edgeAccessFields (reqId: string, status: number, method?: string): Record<string, unknown> {
  return method === undefined ? { reqId, status } : { reqId, method, route: null, status }
}

// On every request from the start: a property added later would change its shape, and slow every request.
async function accessLog (fastify: FastifyInstance): Promise<void> {
  fastify.decorateRequest('createOutcome', null)
  fastify.decorateRequest('caller', null)
}

export default fp(accessLog, { name: 'access-log', fastify: '5.x' })
