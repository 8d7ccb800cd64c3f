import type { IncomingMessage } from 'node:http'
import { randomUUID } from 'node:crypto'

// Request ids: every answer and log line of a request carries one.

// An incoming X-Request-Id is kept when it is short and plain, so a caller
// can follow its request through our logs; anything else gets a fresh id.
const acceptableRequestId = /^[A-Za-z0-9._:-]{1,128}$/

export function genReqId (req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && acceptableRequestId.test(incoming) ? incoming : newRequestId()
}

// A random UUID (version 4): the OpenAPI document promises a generated UUID.
export function newRequestId (): string {
  return randomUUID()
}
