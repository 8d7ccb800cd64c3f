import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

// An incoming X-Request-Id is kept when it is short and plain, so a caller
// can follow its request through our logs; anything else gets a fresh id.
const acceptable = /^[A-Za-z0-9._:-]{1,128}$/

export function genReqId (req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && acceptable.test(incoming) ? incoming : randomUUID()
}
