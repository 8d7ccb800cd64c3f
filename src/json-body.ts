import { HttpError } from './http-error.js'

// JSON.parse, made strict where it is lenient and exact where it rounds (docs/architecture.md, "A request's path", step 7).
//   - One scan of the text first bounds the nesting before anything recurses, counts members (':' outside strings)
//     and notices a number that needs its text: only then is a reviver used, which costs a plain parse three times.
//   - A key twice: the value holds fewer keys than the text has members.
//   - V8 in Node 24, and in Node 26 before 26.12, can misread an escaped key: such a body is read again (see
//     readEscapedKeys, the only part of this file those Node lines need).
// "__proto__" stays plain data: JSON.parse makes it an own property.

export class JsonBodyError extends HttpError {
  override name = 'JsonBodyError'
  constructor (message: string) { super(400, message) }
}

export const MAX_DEPTH = 1000 // far beyond any real request: the service takes flat objects

// Created once: a TextDecoder per request costs more than a small body.
const utf8 = new TextDecoder('utf-8', { fatal: true })

export function parseJsonBody (bytes: Uint8Array): unknown {
  let text: string
  try {
    text = utf8.decode(bytes) // fatal, and drops one BOM
  } catch {
    throw new JsonBodyError('Body is not valid UTF-8')
  }
  const { members, needsText } = scan(text)
  const parsed = parse(text, needsText)
  // The common case: a key twice would leave fewer keys in the value than members in the text. A text with an
  // escape in it is checked key by key whatever the count, because V8 may have misread an escaped key.
  if (!text.includes('\\') && countKeys(parsed) === members) return parsed
  const written = textKeys(text)
  refuseDuplicateKeys(written)
  return written.some((key) => key.escaped) ? readEscapedKeys(text, written, needsText) : parsed
}

function parse (text: string, needsText: boolean): unknown {
  try {
    return needsText ? JSON.parse(text, exactNumbers) : JSON.parse(text)
  } catch (err) {
    throw new JsonBodyError(/^[ \t\n\r]*$/.test(text) ? 'Body is empty' : `Body is not valid JSON: ${syntaxFault(err)}`)
  }
}

// What went wrong in a body JSON.parse refused, without a character of the body: the answer and the log must not
// carry plant data. V8 says what it expected and where ("Expected ':' after property name in JSON at position 5
// (line 1 column 6)"), or quotes the body around an unexpected token, the whole of it when it is 20 characters or
// fewer ('Unexpected token 'F', "Ficus" is not valid JSON'). So only a message that ends with V8's position is read,
// which a quoted body never does, and only its leading words, when they are words of V8's and not the body's.
export function syntaxFault (err: unknown): string {
  const message = err instanceof Error ? err.message : ''
  if (message === 'Unexpected end of JSON input') return message
  const at = /^([A-Z][A-Za-z ,':{}[\]-]*?)(?: in JSON)? at position (\d+)(?: \(line \d+ column \d+\))?$/.exec(message)
  if (at === null || at[1]?.startsWith('Unexpected token') === true) return 'Unexpected token'
  return `${at[1] ?? ''} at position ${at[2] ?? ''}`
}

function exactNumbers (this: unknown, _key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value !== 'number') return value
  // V8 gives no source for a value under a key it misread (Node 24, 26 before 26.12); readEscapedKeys reads the
  // body again.
  if (context?.source === undefined) return value
  return exactNumber(value, context.source)
}

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

// The quote that ends the string opened at `start`, or the text's end: the next quote after an even run of
// backslashes. indexOf skips ahead far faster than a loop over the characters.
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

interface TextKey { key: string, start: number, end: number, object: number, escaped: boolean }

// A key twice in one object, however it is spelled, is refused: JSON.parse would keep the last.
function refuseDuplicateKeys (written: TextKey[]): void {
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
}

// Every key of a valid JSON text, decoded alone, with the number of its object (objects are numbered by their '{').
// A key is the string after '{', or after ',' in an object.
function textKeys (text: string): TextKey[] {
  const keys: TextKey[] = []
  const open: number[] = [] // each open object's number, -1 for an array
  let objects = 0
  let keyNext = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i)
      if (keyNext) {
        // Without a backslash a key is its text: only an escaped one needs decoding.
        const raw = text.slice(i + 1, end)
        const escaped = raw.includes('\\')
        keys.push({ key: escaped ? JSON.parse(text.slice(i, end + 1)) as string : raw, start: i, end: end + 1, object: open.at(-1) as number, escaped })
      }
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

// Only for V8 in Node 24 and in Node 26 before 26.12 (nodejs/node#63785). Once similar keys were parsed, V8 can
// misread an escaped object key ("x\u0061" comes back as "x\", an escaped "\u0074ag" can lose its value), though
// each key parsed alone is right. So the body is parsed again with each escaped key, decoded alone, written back
// without escapes ("\u0061" as "a"). A key that cannot be written without one (a quote, a backslash, a control
// character, a lone surrogate) becomes a placeholder that no key of the text starts with, renamed after the parse.
// Once the supported Node lines no longer include those, this function, its call in parseJsonBody and the
// `text.includes('\\')` test there can go: counting keys then finds a key twice.
function readEscapedKeys (text: string, written: TextKey[], needsText: boolean): unknown {
  let prefix: string | undefined
  const real = new Map<string, string>()
  let rewritten = ''
  let from = 0
  for (const { key, start, end } of written.filter((k) => k.escaped)) {
    let plain = JSON.stringify(key)
    if (plain.includes('\\')) {
      if (prefix === undefined) prefix = placeholderPrefix(written)
      plain = `"${prefix}${real.size}"`
      real.set(plain.slice(1, -1), key)
    }
    rewritten += text.slice(from, start) + plain
    from = end
  }
  const value = parse(rewritten + text.slice(from), needsText)
  return real.size === 0 ? value : copy(value, (key) => real.get(key) ?? key, (leaf) => leaf)
}

// One '@' more than the longest run of '@' that any key starts with, so no key can start with it. Finding it reads
// each key's leading '@'s once.
function placeholderPrefix (written: TextKey[]): string {
  let longest = 0
  for (const { key } of written) {
    let run = 0
    while (key.charCodeAt(run) === 0x40 /* @ */) run++
    if (run > longest) longest = run
  }
  return '@'.repeat(longest + 1)
}

// A parsed body with its bigints as numbers, for a validator that knows no bigint (Ajv): the value itself when it
// holds none, else a copy. The numbers are whole and within int64 already, which is all a validator checks.
export function bigIntsAsNumbers (value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value)
  if (typeof value !== 'object' || value === null || !holdsBigInt(value)) return value
  return copy(value, (key) => key, (leaf) => typeof leaf === 'bigint' ? Number(leaf) : leaf)
}

function holdsBigInt (value: object): boolean {
  for (const item of Object.values(value)) {
    if (typeof item === 'bigint' || (typeof item === 'object' && item !== null && holdsBigInt(item))) return true
  }
  return false
}

// defineProperty, so that a "__proto__" key stays an own property.
function copy (value: unknown, name: (key: string) => string, leaf: (value: unknown) => unknown): unknown {
  if (typeof value !== 'object' || value === null) return leaf(value)
  if (Array.isArray(value)) return value.map((item) => copy(item, name, leaf))
  const out = {}
  for (const [key, item] of Object.entries(value)) {
    Object.defineProperty(out, name(key), { value: copy(item, name, leaf), enumerable: true, writable: true, configurable: true })
  }
  return out
}

// An id is a JSON number whose exact decimal value is whole and within int64.
export const INT64_MAX = 9223372036854775807n
const INT64_MIN_MAGNITUDE = 9223372036854775808n
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER)

// A whole number past int64 (2^63, 1e400): still an integer to the validator, whose int64 format refuses it, saying why.
export const BEYOND_INT64 = Number.MAX_VALUE

const NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/

// A whole number is a number while safe, an exact bigint within int64, else +-BEYOND_INT64; a fraction is its
// double, or NaN (refused as "must be integer") when the double rounded to a whole number.
function exactNumber (value: number, text: string): number | bigint {
  // A finite double that is not whole is final, a safe integer written plainly exact.
  if (Number.isSafeInteger(value) ? !/[.eE]/.test(text) : Number.isFinite(value) && !Number.isInteger(value)) return value + 0
  const [, sign, whole, fraction = '', exponent = '0'] = NUMBER.exec(text) as RegExpExecArray
  // value = digits * 10^(exponent - fraction length); loops trim the zeros, so a long run costs its length only.
  const digits = (whole as string) + fraction
  let first = 0
  while (digits.charCodeAt(first) === 0x30) first++
  if (first === digits.length) return 0 // exactly zero, whatever the sign or exponent
  let last = digits.length - 1
  while (digits.charCodeAt(last) === 0x30) last--
  // Of the last nonzero digit (an exponent past a double's is +-Infinity, which
  // still compares right): below 0 is a nonzero fraction.
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
