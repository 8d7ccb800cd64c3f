import type { IncomingMessage } from 'node:http'
import { isSpanContextValid } from '@opentelemetry/api'
import { parseTraceParent } from '@opentelemetry/core'
import type { FastifyRequest, FastifyReply, FastifyServerOptions } from 'fastify'
import { RequestLogger } from '../../src/logger.js'

// The trace id of a request, as a log field: every log line of a request
// that arrived with a valid W3C traceparent carries `trace_id`, whether or
// not spans are exported, so a log search finds the caller's trace.

export const TRACE_ID_FIELD = 'trace_id'

// The trace id of a traceparent header, or undefined when there is none or it
// is not valid (the header given twice is not valid either: W3C Trace Context).
export function traceIdOf (header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined
  const parent = parseTraceParent(header)
  return parent !== null && isSpanContextValid(parent) ? parent.traceId : undefined
}

// Fastify's childLoggerFactory: the request's logger (src/logger.ts), with
// trace_id bound when the caller sent one. A route with logger options of
// its own gets pino's child at once.
export const childLoggerWithTraceId: NonNullable<FastifyServerOptions['childLoggerFactory']> = function (logger, bindings, opts, rawReq: IncomingMessage) {
  const traceId = traceIdOf(rawReq.headers.traceparent)
  const all = traceId === undefined ? bindings : { ...bindings, [TRACE_ID_FIELD]: traceId }
  return hasOptions(opts as Record<string, unknown>) ? logger.child(all, opts) : new RequestLogger(logger, all)
}

// Fastify passes an object, empty unless the route sets options.
function hasOptions (opts: Record<string, unknown>): boolean {
  for (const key in opts) if (opts[key] !== undefined) return true
  return false
}

// The request started a trace of its own (no traceparent came): its log
// lines from here on carry that trace id.
export function bindTraceId (request: FastifyRequest, reply: FastifyReply, traceId: string): void {
  if (traceIdOf(request.headers.traceparent) === traceId) return
  const log = request.log.child({ [TRACE_ID_FIELD]: traceId })
  request.log = log
  reply.log = log
}
