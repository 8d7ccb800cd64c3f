// The JSON body: JSON.parse, made strict where it is lenient.
//   - UTF-8 only: a fatal TextDecoder (which also drops one BOM).
//   - A key twice, however spelled: one pass counts members (':' outside
//     strings), the reviver counts keys; fewer keys means a duplicate.
//   - Exact numbers: the reviver rebuilds each from its text (context.source).
//   - No stack overflow: the same pass refuses nesting past MAX_DEPTH first.
// "__proto__" stays plain data: JSON.parse stores it as an own property.
import { exactNumber } from './int64.js'
import { repeatedKey, sameKeys, stringEnd, textKeys } from './json-keys.js'

export class JsonBodyError extends Error {
  override name = 'JsonBodyError'
  statusCode = 400
}

// The service takes flat objects; 1000 levels is far beyond any real request.
export const MAX_DEPTH = 1000

// Created once: a TextDecoder per request costs more than a small body.
const utf8 = new TextDecoder('utf-8', { fatal: true })

export function parseJsonBody (bytes: Buffer): unknown {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    throw new JsonBodyError('Body is not valid UTF-8')
  }
  const members = countMembers(text)
  keys = -1 // the reviver also runs for the document itself, in an object
  sourceLost = false
  let value: unknown
  try {
    value = JSON.parse(text, revive)
  } catch (err) {
    if (/^[ \t\n\r]*$/.test(text)) throw new JsonBodyError('Body is empty')
    throw new JsonBodyError(`Body is not valid JSON: ${(err as Error).message}`)
  }
  // Only a body with an escape can have a key misread (json-keys.ts).
  if (keys === members && !sourceLost && !text.includes('\\')) return value
  const written = textKeys(text)
  const repeated = repeatedKey(written)
  if (repeated !== undefined) {
    // A huge key is cut short, so it does not end up whole in a log line.
    const shown = repeated.key.length > 20 ? repeated.key.slice(0, 20) + '…' : repeated.key
    throw new JsonBodyError(`Duplicate key ${JSON.stringify(shown)} in object at position ${repeated.position}`)
  }
  if (keys !== members || sourceLost || !sameKeys(written, value)) throw new JsonBodyError('Body has an escaped key that could not be read exactly')
  return value
}

// Keys of parsed objects seen by the reviver, and whether a number came
// without its text (V8 gives none for a value under a misread key). Parsing
// is synchronous and never re-entered: module variables serve every call.
let keys = 0
let sourceLost = false

function revive (this: unknown, _key: string, value: unknown, context?: { source?: string }): unknown {
  if (!Array.isArray(this)) keys++
  if (typeof value !== 'number') return value
  if (context?.source !== undefined) return exactNumber(value, context.source)
  sourceLost = true
  return value
}

// Members (':' outside strings) of the text; throws past MAX_DEPTH. On text
// that is not JSON the count means nothing, but JSON.parse refuses it anyway.
function countMembers (text: string): number {
  let members = 0
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22 /* " */) i = stringEnd(text, i)
    else if (c === 0x3a /* : */) members++
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--
    else if ((c === 0x7b /* { */ || c === 0x5b /* [ */) && ++depth > MAX_DEPTH) {
      throw new JsonBodyError(`Body nests deeper than ${MAX_DEPTH} levels at position ${i}`)
    }
  }
  return members
}
