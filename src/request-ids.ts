import type { IncomingMessage } from 'node:http'
import { randomUUID } from 'node:crypto'
import { isSpanContextValid } from '@opentelemetry/api'
import { parseTraceParent } from '@opentelemetry/core'

// On every log line whether or not spans are exported (docs/operations.md, "Logs" and "Traces").

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

// Undefined when there is none or it is not valid (given twice is not: W3C Trace Context).
export function traceIdOf (header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined
  const parent = parseTraceParent(header)
  return parent !== null && isSpanContextValid(parent) ? parent.traceId : undefined
}
