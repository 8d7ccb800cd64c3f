import type { IncomingMessage } from 'node:http'
import { isSpanContextValid } from '@opentelemetry/api'
import { parseTraceParent } from '@opentelemetry/core'
import type { FastifyRequest, FastifyReply, FastifyServerOptions } from 'fastify'

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

// Fastify's childLoggerFactory: the request's pino child, with trace_id
// bound when the caller sent one.
export const childLoggerWithTraceId: NonNullable<FastifyServerOptions['childLoggerFactory']> = function (logger, bindings, opts, rawReq: IncomingMessage) {
  const traceId = traceIdOf(rawReq.headers.traceparent)
  return logger.child(traceId === undefined ? bindings : { ...bindings, [TRACE_ID_FIELD]: traceId }, opts)
}

// The request started a trace of its own (no traceparent came): its log
// lines from here on carry that trace id.
export function bindTraceId (request: FastifyRequest, reply: FastifyReply, traceId: string): void {
  if (traceIdOf(request.headers.traceparent) === traceId) return
  const log = request.log.child({ [TRACE_ID_FIELD]: traceId })
  request.log = log
  reply.log = log
}
