import { HttpError } from './http-error.js'

// The JSON body: JSON.parse, made strict where it is lenient and exact where
// it rounds (docs/architecture.md, "A request's path", step 7).
//   - UTF-8 only: a fatal TextDecoder (which also drops one BOM).
//   - One scan of the text first: nesting past MAX_DEPTH is refused before
//     anything recurses, members (':' outside strings) are counted, and a
//     number that needs its own text (16 or more digits, or an exponent) is
//     noticed. Only then is a reviver used: it costs a plain parse three times.
//   - A key twice, however spelled: the parsed value holds fewer keys than
//     the text has members; which key, only then.
//   - Keys with escapes are compared with the text's own: V8 in Node 24 (and
//     26 before 26.12) can misread one once similar keys were parsed. Such a
//     body is read again with those keys swapped for plain placeholders,
//     each decoded alone (which V8 reads right): a valid body is never refused.
// "__proto__" stays plain data: JSON.parse makes it an own property.

export class JsonBodyError extends HttpError {
  constructor (message: string) {
    super(400, message)
    this.name = 'JsonBodyError'
  }
}

// The service takes flat objects; 1000 levels is far beyond any real request.
export const MAX_DEPTH = 1000

// Created once: a TextDecoder per request costs more than a small body.
const utf8 = new TextDecoder('utf-8', { fatal: true })

export function parseJsonBody (bytes: Uint8Array): unknown {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    throw new JsonBodyError('Body is not valid UTF-8')
  }
  const { members, needsText } = scan(text)
  const value = parse(text, needsText)
  if (countKeys(value) === members && !sourceLost && !text.includes('\\')) return value
  return checkKeys(text, value, needsText)
}

// Bodies that hold a bigint (an id past 2^53): Ajv knows no bigint, so the
// validator checks a copy (forValidation).
const withBigInts = new WeakSet<object>()
// Set by the reviver; parsing is synchronous and never re-entered.
let sawBigInt = false
let sourceLost = false

function parse (text: string, needsText: boolean): unknown {
  sawBigInt = false
  sourceLost = false
  let value: unknown
  try {
    value = needsText ? JSON.parse(text, exactNumbers) : JSON.parse(text)
  } catch (err) {
    throw new JsonBodyError(/^[ \t\n\r]*$/.test(text) ? 'Body is empty' : `Body is not valid JSON: ${syntaxFault(err)}`)
  }
  if (sawBigInt && typeof value === 'object' && value !== null) withBigInts.add(value)
  return value
}

// V8's message quotes the text around the fault ("Unexpected token ''', ..."name":'Monstera"...):
// plant data, which must reach neither the answer nor the log. Its position is kept.
function syntaxFault (err: unknown): string {
  const message = err instanceof Error ? err.message : ''
  const at = /^(.*?)(?: in JSON)? at position (\d+)/.exec(message)
  if (at !== null) return `${at[1] ?? ''} at position ${at[2] ?? ''}`
  return message === 'Unexpected end of JSON input' ? message : 'Unexpected token'
}

function exactNumbers (this: unknown, _key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value !== 'number') return value
  // V8 gives no source for a value under a misread key (checkKeys reads it again).
  if (context?.source === undefined) {
    sourceLost = true
    return value
  }
  const exact = exactNumber(value, context.source)
  if (typeof exact === 'bigint') sawBigInt = true
  return exact
}

// Members of the text, whether a number needs its text, and the depth bound.
// On text that is not JSON the figures mean nothing: JSON.parse refuses it.
function scan (text: string): { members: number, needsText: boolean } {
  let members = 0
  let depth = 0
  let digits = 0
  let needsText = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c >= 0x30 && c <= 0x39) {
      if (++digits >= 16) needsText = true
      continue
    }
    if (c === 0x2e /* . */) continue
    // An exponent follows a digit (the e of true and false does not); -0 is 0.
    if (((c | 0x20) === 0x65 /* e E */ && digits > 0) || (c === 0x2d /* - */ && text.charCodeAt(i + 1) === 0x30)) needsText = true
    digits = 0
    if (c === 0x22 /* " */) i = stringEnd(text, i)
    else if (c === 0x3a /* : */) members++
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--
    else if ((c === 0x7b /* { */ || c === 0x5b /* [ */) && ++depth > MAX_DEPTH) {
      throw new JsonBodyError(`Body nests deeper than ${MAX_DEPTH} levels at position ${i}`)
    }
  }
  return { members, needsText }
}

// The index of the quote that ends the string opened at `start` (the end of
// the text if none does): the next quote not escaped by an odd run of
// backslashes. indexOf skips a long string far faster than a loop.
function stringEnd (text: string, start: number): number {
  let end = start
  for (;;) {
    end = text.indexOf('"', end + 1)
    if (end === -1) return text.length
    let slashes = 0
    while (text.charCodeAt(end - 1 - slashes) === 0x5c /* \ */) slashes++
    if (slashes % 2 === 0) return end
  }
}

function countKeys (value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0
  let keys = 0
  if (Array.isArray(value)) {
    for (const item of value) if (typeof item === 'object' && item !== null) keys += countKeys(item)
    return keys
  }
  for (const key in value) keys += 1 + countKeys((value as Record<string, unknown>)[key])
  return keys
}

interface TextKey { key: string, start: number, end: number, object: number }

// The slow path, for a body with a key twice or a key with an escape.
function checkKeys (text: string, value: unknown, needsText: boolean): unknown {
  const written = textKeys(text)
  const seen = new Set<string>()
  for (const { key, start, object } of written) {
    const id = `${object}:${key}`
    if (seen.has(id)) {
      // A huge key is cut short, so it does not end up whole in a log line.
      const shown = key.length > 20 ? key.slice(0, 20) + '…' : key
      throw new JsonBodyError(`Duplicate key ${JSON.stringify(shown)} in object at position ${start}`)
    }
    seen.add(id)
  }
  if (!sourceLost && sameKeys(written, value)) return value
  return readWithPlaceholders(text, written, needsText)
}

// Every key of a valid JSON text, decoded alone, with the number of its
// object (objects numbered by their '{'). A key is the string after '{' or
// after a ',' in an object; valid JSON needs no other check.
function textKeys (text: string): TextKey[] {
  const keys: TextKey[] = []
  const open: number[] = [] // each open object's number, -1 for an array
  let objects = 0
  let keyNext = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i)
      if (keyNext) keys.push({ key: JSON.parse(text.slice(i, end + 1)) as string, start: i, end: end + 1, object: open.at(-1) as number })
      keyNext = false
      i = end
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      open.push(c === 0x7b ? objects++ : -1)
      keyNext = c === 0x7b
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      open.pop()
    } else if (c === 0x2c /* , */) {
      keyNext = (open.at(-1) ?? -1) >= 0
    }
  }
  return keys
}

function sameKeys (written: TextKey[], value: unknown): boolean {
  const parsed: string[] = []
  const collect = (v: unknown): void => {
    if (typeof v !== 'object' || v === null) return
    if (!Array.isArray(v)) parsed.push(...Object.keys(v))
    for (const item of Object.values(v)) collect(item)
  }
  collect(value)
  if (parsed.length !== written.length) return false
  const keys = written.map((k) => k.key).sort()
  return parsed.sort().every((key, i) => key === keys[i])
}

// The text again with every key that holds an escape replaced by a plain
// placeholder no key of the text starts with; parsed, then each placeholder
// renamed to its key as decoded alone.
function readWithPlaceholders (text: string, written: TextKey[], needsText: boolean): unknown {
  let prefix = '@'
  while (written.some(({ key }) => key.startsWith(prefix))) prefix += '@'
  const real = new Map<string, string>()
  let rewritten = ''
  let from = 0
  for (const { key, start, end } of written) {
    if (!text.slice(start, end).includes('\\')) continue
    const placeholder = `${prefix}${real.size}`
    real.set(placeholder, key)
    rewritten += `${text.slice(from, start)}"${placeholder}"`
    from = end
  }
  return renamed(parse(rewritten + text.slice(from), needsText), real)
}

function renamed (value: unknown, real: ReadonlyMap<string, string>): unknown {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map((item) => renamed(item, real))
  const out = {}
  for (const [key, item] of Object.entries(value)) {
    // defineProperty, so that a "__proto__" key stays an own property.
    Object.defineProperty(out, real.get(key) ?? key, { value: renamed(item, real), enumerable: true, writable: true, configurable: true })
  }
  if (withBigInts.has(value)) withBigInts.add(out)
  return out
}

// What the validator checks: the body itself, or a copy in which bigints are
// numbers (still whole and already range-checked) while the handler keeps the
// exact bigint.
export function forValidation (body: unknown): unknown {
  return typeof body === 'object' && body !== null && withBigInts.has(body) ? bigIntsAsNumbers(body) : body
}

function bigIntsAsNumbers (value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value)
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map(bigIntsAsNumbers)
  const copy = {}
  for (const [key, item] of Object.entries(value)) {
    Object.defineProperty(copy, key, { value: bigIntsAsNumbers(item), enumerable: true, writable: true, configurable: true })
  }
  return copy
}

// The int64 rule for ids: a JSON number is an id when its exact decimal value
// is whole and within int64, exact end to end past 2^53.
export const INT64_MAX = 9223372036854775807n
const INT64_MIN_MAGNITUDE = 9223372036854775808n
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER)

// A whole number past int64 (2^63, 1e400): the largest double, so that it is
// still an integer to a JSON Schema validator and the int64 format is the
// rule that refuses it ("must match format int64" tells the client why).
export const BEYOND_INT64 = Number.MAX_VALUE

const NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/

// A JSON number from its double and its text: a whole one is a number while
// safe, an exact bigint within int64, else +-BEYOND_INT64; a fraction is its
// double, or NaN when the double rounded to a whole number (the validator
// refuses NaN as "must be integer"; such markers are never stored or echoed).
function exactNumber (value: number, text: string): number | bigint {
  // A finite double that is not whole is final; a safe integer written
  // without fraction or exponent is exact.
  if (Number.isSafeInteger(value) ? !/[.eE]/.test(text) : Number.isFinite(value) && !Number.isInteger(value)) return value + 0
  const [, sign, whole, fraction = '', exponent = '0'] = NUMBER.exec(text) as RegExpExecArray
  // value = digits * 10^(exponent - fraction length); loops trim the zeros,
  // so a long run of them costs its length only.
  const digits = (whole as string) + fraction
  let first = 0
  while (digits.charCodeAt(first) === 0x30) first++
  if (first === digits.length) return 0 // exactly zero, whatever the sign or exponent
  let last = digits.length - 1
  while (digits.charCodeAt(last) === 0x30) last--
  // Scale of the last nonzero digit (an exponent past a double's range is
  // +-Infinity, which still compares right): below 0 is a nonzero fraction.
  const scale = Number(exponent) - fraction.length + (digits.length - 1 - last)
  if (scale < 0) return NaN
  const negative = sign === '-'
  const significant = digits.slice(first, last + 1)
  // Past 19 digits it is past int64 whatever the exponent: no BigInt built.
  if (significant.length + scale > 19) return negative ? -BEYOND_INT64 : BEYOND_INT64
  const magnitude = BigInt(significant + '0'.repeat(scale))
  if (magnitude > (negative ? INT64_MIN_MAGNITUDE : INT64_MAX)) return negative ? -BEYOND_INT64 : BEYOND_INT64
  if (magnitude <= SAFE_MAX) return negative ? -Number(magnitude) : Number(magnitude)
  return negative ? -magnitude : magnitude
}
