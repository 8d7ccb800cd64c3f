import type { IncomingMessage } from 'node:http'
import { randomUUID } from 'node:crypto'
import { isSpanContextValid } from '@opentelemetry/api'
import { parseTraceParent } from '@opentelemetry/core'
import type { FastifyRequest, FastifyReply, FastifyServerOptions } from 'fastify'

// The request id and a traceparent's trace id, on every log line whether or
// not spans are exported (docs/operations.md, "Logs" and "Traces").

// An incoming X-Request-Id is kept when short and plain, so a caller can follow it; else a fresh id.
const acceptableRequestId = /^[A-Za-z0-9._:-]{1,128}$/

export function genReqId (req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && acceptableRequestId.test(incoming) ? incoming : newRequestId()
}

// A random UUID (version 4): the OpenAPI document promises a generated UUID.
export function newRequestId (): string {
  return randomUUID()
}

export const TRACE_ID_FIELD = 'trace_id'

// The trace id of a traceparent header, or undefined when there is none or it
// is not valid (the header given twice is not valid either: W3C Trace Context).
export function traceIdOf (header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined
  const parent = parseTraceParent(header)
  return parent !== null && isSpanContextValid(parent) ? parent.traceId : undefined
}

// Fastify's childLoggerFactory: trace_id bound when the caller sent one.
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
