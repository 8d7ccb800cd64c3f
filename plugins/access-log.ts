import fp from 'fastify-plugin'
import { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { isSpanContextValid } from '@opentelemetry/api'
import { parseTraceParent } from '@opentelemetry/core'
import type { Level } from 'pino'
import type { AnswerKind } from '../src/store/plant-store.js'

// One access line per answer, once sent, with what an operator searches by (docs/operations.md, "Logs") and nothing
// a caller sent as data; the request id and a traceparent's trace id on every line, whether or not spans are
// exported (docs/operations.md, "Traces").

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

// An incoming X-Request-Id is kept when short and plain, so a caller can follow it; else a fresh id.
const acceptableRequestId = /^[A-Za-z0-9._:-]{1,128}$/

export function genReqId (req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && acceptableRequestId.test(incoming) ? incoming : newRequestId()
}

// A random UUID (version 4): the OpenAPI document promises a generated UUID.
export const newRequestId = (): string => randomUUID()

export const TRACE_ID_FIELD = 'trace_id'

// Undefined when there is none or it is not valid (given twice is not: W3C Trace Context).
export function traceIdOf (header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined
  const parent = parseTraceParent(header)
  return parent !== null && isSpanContextValid(parent) ? parent.traceId : undefined
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
