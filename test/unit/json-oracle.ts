// The oracle of json-differential.test.ts: the hand-written parser the
// service used before its bodies went through JSON.parse, kept as it was
// (import path aside), so the new parser is checked against the behaviour
// it replaced rather than against itself.
//
// Strict JSON body parser for the HTTP API.
//
// Why not JSON.parse or a library: JSON.parse silently keeps the last of two
// duplicate keys and rounds every number to a double, and no maintained
// parser both rejects duplicate keys (even with identical values) and keeps
// int64 exact (lossless-json accepts {"a":1,"a":1} and recurses, so deep
// nesting overflows the stack). This parser:
//   - requires valid UTF-8 and strict RFC 8259 grammar,
//   - rejects any repeated key in an object (compared after unescaping),
//   - treats "__proto__" and "constructor" as ordinary own properties,
//   - is iterative (an explicit stack) with a depth limit, MAX_DEPTH,
//   - decides from each number's text whether its exact value is whole.
//
// Number results (the exact decimal value of the token decides):
//   whole, safe integer range            -> number (-0 becomes 0)
//   whole, int64 range but not safe      -> bigint with the exact value
//   whole, outside int64                 -> BEYOND_INT64 / -BEYOND_INT64 (by sign)
//   (the whole-number cases are the int64 rule: exactNumber in src/json-body.ts)
//   not whole, Number(text) is a finite non-integer double -> that double
//   not whole, but the double rounded to a whole number, 0 or +-Infinity
//                                        -> NaN
// BEYOND_INT64 and NaN are markers: the validator downstream rejects the
// first as outside the int64 format and the second as "must be integer", and
// numbers that are not ids are never stored or echoed, so the markers never
// leave the service.
//
// Error positions are UTF-16 code unit offsets into the decoded body.

const INT64_MAX = 9223372036854775807n
const INT64_MIN_MAGNITUDE = 9223372036854775808n
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER)
const BEYOND_INT64 = Number.MAX_VALUE

// The value of a whole number given as its significant digits followed by
// `zeros` zeros.
function int64Value (negative: boolean, digits: string, zeros: number): number | bigint {
  if (digits.length + zeros > 19) return negative ? -BEYOND_INT64 : BEYOND_INT64
  const magnitude = BigInt(digits + '0'.repeat(zeros))
  if (magnitude > (negative ? INT64_MIN_MAGNITUDE : INT64_MAX)) return negative ? -BEYOND_INT64 : BEYOND_INT64
  if (magnitude <= SAFE_MAX) return negative ? -Number(magnitude) : Number(magnitude)
  return negative ? -magnitude : magnitude
}

export class JsonBodyError extends Error {
  statusCode = 400

  constructor (message: string) {
    super(message)
    this.name = 'JsonBodyError'
  }
}

// The service only takes flat objects; 1000 levels is far beyond any real
// request and keeps the explicit stack (and any later recursive walk of the
// result, e.g. by a schema validator) small.
export const MAX_DEPTH = 1000

// Created once: constructing a TextDecoder per request costs more than
// decoding a small body.
const utf8 = new TextDecoder('utf-8', { fatal: true })

// Exponents saturate here: far past anything that can matter (int64 has 19
// digits, a double's range ends near 1e308) yet small enough that adding a
// body length (< 2^30 code units) keeps the arithmetic exact.
const EXP_SATURATION = 1e15
// Up to this many digits (10^15 < 2^53) accumulate in a double exactly.
const FAST_DIGITS = 15

// Parser state lives at module level: parsing is synchronous and never
// re-entered, and plain variables are faster than an object or closures.
let src = ''
let pos = 0
// Open containers, innermost last, `depth` of them. keys[k] is the key of
// the member being parsed in containers[k] when it is an object.
const containers: Array<unknown[] | Record<string, unknown>> = []
const isArray: boolean[] = []
const keys: string[] = []
let depth = 0

export function parseJsonBody (bytes: Buffer): unknown {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    throw new JsonBodyError('Body is not valid UTF-8')
  }
  src = text
  pos = 0
  depth = 0
  try {
    skipWs()
    if (pos >= src.length) throw new JsonBodyError('Body is empty')
    return parseDocument()
  } finally {
    // Do not keep a large body, or a part of it, alive between requests.
    src = ''
    containers.length = 0
    keys.length = 0
  }
}

// Told by parseValue that it opened a container, and by closeContainers that
// it read a separator: the next thing in the body is a value. No JSON value
// is a symbol.
const VALUE_NEXT = Symbol('value next')

// Iterative, not recursive: each value is parsed, then stored in its
// container, closing every container that ends after it.
function parseDocument (): unknown {
  for (;;) {
    const value = parseValue()
    if (value === VALUE_NEXT) continue
    const document = storeValue(value)
    if (document !== VALUE_NEXT) return document
  }
}

// Parses one value, or opens the container it starts (VALUE_NEXT).
function parseValue (): unknown {
  skipWs()
  const c = src.charCodeAt(pos)
  if (c === 0x7b /* { */ || c === 0x5b /* [ */) return openContainer(c === 0x5b)
  if (c === 0x22 /* " */) {
    pos++
    return parseString()
  }
  if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) return parseNumber()
  if (c === 0x74 /* t */ && src.startsWith('true', pos)) {
    pos += 4
    return true
  }
  if (c === 0x66 /* f */ && src.startsWith('false', pos)) {
    pos += 5
    return false
  }
  if (c === 0x6e /* n */ && src.startsWith('null', pos)) {
    pos += 4
    return null
  }
  throw unexpected()
}

// pos is at '{' or '['. An empty container is a value at once; any other
// is pushed (for an object, with its first key read) and VALUE_NEXT returned.
function openContainer (array: boolean): unknown {
  if (depth >= MAX_DEPTH) {
    throw new JsonBodyError(`Body nests deeper than ${MAX_DEPTH} levels at position ${pos}`)
  }
  pos++
  skipWs()
  if (src.charCodeAt(pos) === (array ? 0x5d /* ] */ : 0x7d /* } */)) {
    pos++
    return array ? [] : {}
  }
  const container = array ? [] : {}
  containers[depth] = container
  isArray[depth] = array
  if (!array) keys[depth] = parseKey(container)
  depth++
  return VALUE_NEXT
}

// Stores a parsed value in the innermost open container and closes every
// container that ends here. Returns the whole document once nothing is
// open, or VALUE_NEXT after a separator.
function storeValue (value: unknown): unknown {
  for (;;) {
    skipWs()
    if (depth === 0) {
      if (pos < src.length) throw unexpected()
      return value
    }
    const top = depth - 1
    const container = containers[top]
    const c = src.charCodeAt(pos)
    if (isArray[top] === true) {
      (container as unknown[]).push(value)
      if (c === 0x2c /* , */) {
        pos++
        return VALUE_NEXT
      }
      if (c !== 0x5d /* ] */) throw unexpected()
    } else {
      setMember(container as Record<string, unknown>, keys[top] as string, value)
      if (c === 0x2c /* , */) {
        pos++
        skipWs()
        keys[top] = parseKey(container as Record<string, unknown>)
        return VALUE_NEXT
      }
      if (c !== 0x7d /* } */) throw unexpected()
    }
    pos++
    value = container
    depth = top
  }
}

// Parses `"key" :` with pos at the opening quote, leaves pos after the colon.
// Earlier members are already stored, so a repeat is caught here, at the key.
function parseKey (obj: Record<string, unknown>): string {
  if (src.charCodeAt(pos) !== 0x22) throw unexpected()
  const start = pos
  pos++
  const key = parseString()
  if (Object.hasOwn(obj, key)) {
    throw new JsonBodyError(`Duplicate key ${JSON.stringify(snippet(key))} in object at position ${start}`)
  }
  skipWs()
  if (src.charCodeAt(pos) !== 0x3a /* : */) throw unexpected()
  pos++
  return key
}

function setMember (obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    // Assignment would call the Object.prototype.__proto__ setter and change
    // the object's prototype; define an own data property instead.
    Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true })
  } else {
    // Every other property of Object.prototype is a writable data property,
    // so assignment creates an own property ("constructor" included). This
    // assumes Object.prototype is not frozen (node --frozen-intrinsics).
    obj[key] = value
  }
}

function skipWs (): void {
  for (;;) {
    const c = src.charCodeAt(pos)
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) pos++
    else return
  }
}

// A run of string characters that need no attention. Long strings are
// skipped with it: the regex engine scans faster than a charCodeAt loop,
// but a call costs more than scanning a short key.
// eslint-disable-next-line no-control-regex -- U+0000..U+001F are what JSON forbids unescaped
const PLAIN_RUN = /[^"\\\u0000-\u001f]*/y
const SCAN_BEFORE_REGEX = 32

// pos is just after the opening quote; leaves pos after the closing quote.
function parseString (): string {
  const start = pos
  const len = src.length
  let i = pos
  for (;;) {
    const c = src.charCodeAt(i)
    if (c === 0x22) {
      pos = i + 1
      return src.slice(start, i)
    }
    if (c === 0x5c) return parseEscapedString(start, i)
    // !(c >= 0x20) is also true for NaN, which charCodeAt returns at the end.
    if (!(c >= 0x20)) throw badStringChar(i, len)
    i++
    if (i - start === SCAN_BEFORE_REGEX) {
      PLAIN_RUN.lastIndex = i
      PLAIN_RUN.test(src)
      i = PLAIN_RUN.lastIndex
    }
  }
}

// Escaped strings are assembled from UTF-16 code units in a scratch buffer:
// appending many short pieces with += builds a deep rope, far slower on
// escape-dense input. Long plain runs are still appended as
// slices. String.fromCharCode (unlike a UTF-16 TextDecoder) keeps lone
// surrogates, which must reach the route unchanged.
const scratch = new Uint16Array(4096)

function flush (n: number): string {
  // apply takes any array-like; the cast only satisfies the declared type.
  return String.fromCharCode.apply(null, (n === scratch.length ? scratch : scratch.subarray(0, n)) as unknown as number[])
}

// start is the first character of the string, i the first backslash.
function parseEscapedString (start: number, i: number): string {
  const len = src.length
  let out = src.slice(start, i)
  let n = 0 // code units waiting in scratch
  for (;;) {
    let c = src.charCodeAt(i)
    if (c === 0x22) {
      pos = i + 1
      return out + flush(n)
    }
    if (c === 0x5c) {
      c = parseEscape(i)
      i += c > 0xffff ? 6 : 2
      scratch[n++] = c // the store keeps the low 16 bits
      if (n === scratch.length) {
        out += flush(n)
        n = 0
      }
      continue
    }
    if (!(c >= 0x20)) throw badStringChar(i, len)
    // A run of plain characters up to the next special one.
    let j = i + 1
    for (;;) {
      c = src.charCodeAt(j)
      if (c === 0x22 || c === 0x5c || !(c >= 0x20) || j - i === SCAN_BEFORE_REGEX) break
      j++
    }
    if (j - i === SCAN_BEFORE_REGEX) {
      // Long run: skip it with the regex and append it as one slice.
      PLAIN_RUN.lastIndex = j
      PLAIN_RUN.test(src)
      j = PLAIN_RUN.lastIndex
      if (n !== 0) {
        out += flush(n)
        n = 0
      }
      out += src.slice(i, j)
    } else {
      // Short run: copy it, so short pieces never pile up in a rope.
      for (; i < j; i++) {
        scratch[n++] = src.charCodeAt(i)
        if (n === scratch.length) {
          out += flush(n)
          n = 0
        }
      }
    }
    i = j
  }
}

function badStringChar (i: number, len: number): JsonBodyError {
  if (i >= len) return new JsonBodyError(`Body is not valid JSON: unterminated string at position ${i}`)
  return new JsonBodyError(`Body is not valid JSON: unescaped control character ${describe(i)} in string at position ${i}`)
}

// i is at the backslash. Returns the code unit; for a \uXXXX escape it is
// tagged with bit 16 so the caller knows the escape was 6 characters long.
function parseEscape (i: number): number {
  switch (src.charCodeAt(i + 1)) {
    case 0x22: return 0x22 // "
    case 0x5c: return 0x5c // \
    case 0x2f: return 0x2f // /
    case 0x62: return 0x08 // b
    case 0x66: return 0x0c // f
    case 0x6e: return 0x0a // n
    case 0x72: return 0x0d // r
    case 0x74: return 0x09 // t
    case 0x75: { // u
      const code = (hex(src.charCodeAt(i + 2)) << 12) | (hex(src.charCodeAt(i + 3)) << 8) |
        (hex(src.charCodeAt(i + 4)) << 4) | hex(src.charCodeAt(i + 5))
      // An escaped surrogate pair becomes the right character once both
      // halves sit side by side; a lone surrogate (and \u0000) is kept as is
      // for the route to judge.
      if (code >= 0) return code | 0x10000
    }
  }
  throw new JsonBodyError(`Body is not valid JSON: invalid escape ${JSON.stringify(src.slice(i, Math.min(i + 6, src.length)))} at position ${i}`)
}

// -1 spreads through the | in parseEscape, making the whole code negative.
function hex (c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30
  if (c >= 0x61 && c <= 0x66) return c - 0x57
  if (c >= 0x41 && c <= 0x46) return c - 0x37
  return -1
}

function isDigit (c: number): boolean {
  return c >= 0x30 && c <= 0x39
}

// Exact powers of ten as doubles (10^22 is the largest that is exact).
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k)

// pos is at '-' or the first digit; leaves pos after the number.
function parseNumber (): number | bigint {
  const start = pos
  const negative = src.charCodeAt(pos) === 0x2d
  if (negative) pos++
  const intStart = pos
  // acc collects all digits (integer and fraction part); it is only used
  // when there are at most FAST_DIGITS of them, so it stays exact.
  let acc = 0
  let c = src.charCodeAt(pos)
  if (c === 0x30) {
    pos++ // a digit after a leading 0 is left for the caller to reject
  } else if (isDigit(c)) {
    do {
      acc = acc * 10 + (c - 0x30)
      c = src.charCodeAt(++pos)
    } while (isDigit(c))
  } else {
    throw unexpected()
  }
  const intEnd = pos
  let fracStart = pos
  let fracEnd = pos
  if (src.charCodeAt(pos) === 0x2e /* . */) {
    fracStart = ++pos
    c = src.charCodeAt(pos)
    if (!isDigit(c)) throw unexpected()
    do {
      acc = acc * 10 + (c - 0x30)
      c = src.charCodeAt(++pos)
    } while (isDigit(c))
    fracEnd = pos
  }
  let exponent = 0
  c = src.charCodeAt(pos)
  if (c === 0x65 || c === 0x45) { // e E
    c = src.charCodeAt(++pos)
    const expNegative = c === 0x2d
    if (expNegative || c === 0x2b) c = src.charCodeAt(++pos)
    if (!isDigit(c)) throw unexpected()
    do {
      // Saturate instead of overflowing: 1e1000000000 costs its length only.
      if (exponent < EXP_SATURATION) exponent = exponent * 10 + (c - 0x30)
      c = src.charCodeAt(++pos)
    } while (isDigit(c))
    if (expNegative) exponent = -exponent
  }

  const fracLength = fracEnd - fracStart
  if (intEnd - intStart + fracLength <= FAST_DIGITS) {
    // value = acc * 10^scale with acc < 2^53 exact. With |scale| <= 22 one
    // IEEE multiplication or division is correctly rounded, so d is what
    // Number(text) would give (Clinger's fast path).
    const scale = exponent - fracLength
    if (scale === 0) return negative ? 0 - acc : acc // 0 - 0 is +0: "-0" gives 0
    if (scale > 0 && scale <= 22) {
      const d = acc * POW10[scale]!
      // Whole; exact while it is a safe integer, otherwise bigint/BEYOND_INT64.
      if (d <= Number.MAX_SAFE_INTEGER) return negative ? 0 - d : d
    } else if (scale < 0 && scale >= -22) {
      const d = acc / POW10[-scale]!
      if (!Number.isInteger(d)) return negative ? -d : d
    }
  }
  if (fracLength !== 0 || exponent !== 0) {
    // A finite non-integer double means the exact value is not whole either
    // (every whole value rounds to a whole double), so it is final.
    const d = Number(src.slice(start, pos))
    if (Number.isFinite(d) && !Number.isInteger(d)) return d
  }
  return exactNumber(negative, intStart, intEnd, fracStart, fracEnd, exponent)
}

// Slow path for long integers and for tokens whose double is whole or
// infinite: decides from the digits whether the exact value is whole and
// builds a BigInt of at most 19 digits, so the work is bounded by the token
// length whatever the exponent.
function exactNumber (negative: boolean, intStart: number, intEnd: number,
  fracStart: number, fracEnd: number, exponent: number): number | bigint {
  // value = digits * 10^(exponent - fraction length)
  const digits = src.slice(intStart, intEnd) + src.slice(fracStart, fracEnd)
  let first = 0
  while (first < digits.length && digits.charCodeAt(first) === 0x30) first++
  if (first === digits.length) return 0 // exactly zero, whatever the sign or exponent
  let last = digits.length - 1
  while (digits.charCodeAt(last) === 0x30) last--
  // Scale of the last nonzero digit: below 0 means a nonzero fraction.
  const scale = exponent - (fracEnd - fracStart) + (digits.length - 1 - last)
  if (scale < 0) return NaN // not whole, and the double lost the fraction
  return int64Value(negative, digits.slice(first, last + 1), scale)
}

function unexpected (): JsonBodyError {
  if (pos >= src.length) return new JsonBodyError(`Body is not valid JSON: unexpected end of input at position ${pos}`)
  return new JsonBodyError(`Body is not valid JSON: unexpected character ${describe(pos)} at position ${pos}`)
}

// One character for an error message: printable ASCII quoted, anything else
// as U+XXXX so control characters and odd code points stay readable.
function describe (at: number): string {
  const cp = src.codePointAt(at) as number
  if (cp >= 0x21 && cp <= 0x7e) return `'${String.fromCharCode(cp)}'`
  return 'U+' + cp.toString(16).toUpperCase().padStart(4, '0')
}

// Caps an echoed key so a huge key does not end up in a log line.
function snippet (s: string): string {
  return s.length > 20 ? s.slice(0, 20) + '…' : s
}
