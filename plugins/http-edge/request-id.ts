import type { IncomingMessage } from 'node:http'
import { randomFillSync } from 'node:crypto'

// Request ids: every answer and log line of a request carries one.

// An incoming X-Request-Id is kept when it is short and plain, so a caller
// can follow its request through our logs; anything else gets a fresh id.
const acceptableRequestId = /^[A-Za-z0-9._:-]{1,128}$/

export function genReqId (req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && acceptableRequestId.test(incoming) ? incoming : newRequestId()
}

// A fresh id is a random UUID (version 4; the OpenAPI document promises a
// generated UUID). They are made a block at a time: one random fill and one
// formatting pass per BLOCK ids, and each id is then one flat string cut
// from the block's text. crypto.randomUUID builds each id from some twenty
// concatenated pieces that are flattened again when the id is written, on
// every request (bench/RESULTS.md).
const BLOCK = 1024
const UUID_BYTES = 16
const UUID_CHARS = 36
const random = Buffer.alloc(UUID_BYTES * BLOCK)
const text = Buffer.alloc(UUID_CHARS * BLOCK)
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1')
const DASH = 0x2d
let taken = BLOCK

function refill (): void {
  randomFillSync(random)
  let at = 0
  for (let id = 0; id < BLOCK; id++) {
    const from = id * UUID_BYTES
    // RFC 9562: version 4 in the high nibble of byte 6, variant 10 in the
    // high bits of byte 8.
    random[from + 6] = ((random[from + 6] as number) & 0x0f) | 0x40
    random[from + 8] = ((random[from + 8] as number) & 0x3f) | 0x80
    for (let b = 0; b < UUID_BYTES; b++) {
      if (b === 4 || b === 6 || b === 8 || b === 10) text[at++] = DASH
      const byte = random[from + b] as number
      text[at++] = HEX_DIGITS[byte >> 4] as number
      text[at++] = HEX_DIGITS[byte & 0x0f] as number
    }
  }
  taken = 0
}

export function newRequestId (): string {
  if (taken === BLOCK) refill()
  const start = taken++ * UUID_CHARS
  return text.toString('latin1', start, start + UUID_CHARS)
}
