// The int64 rule for ids, in one place: a JSON number is an id when its
// exact decimal value is whole and within int64, exact end to end past 2^53.
// The parser rebuilds each number from its text (exactNumber); the validator
// checks a copy without bigints, which Ajv does not know (forValidator).

export const INT64_MAX = 9223372036854775807n
const INT64_MIN_MAGNITUDE = 9223372036854775808n
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER)

// A whole number past int64 (2^63, 1e400): the largest double, so that it is
// still an integer to a JSON Schema validator and the int64 format is the
// rule that refuses it ("must match format int64" tells the client why;
// Infinity would read "must be integer" of a whole number).
export const BEYOND_INT64 = Number.MAX_VALUE

// The value of a whole number given as its significant digits (no leading
// or trailing zeros, at least one digit) followed by `zeros` zeros. Past 19
// digits it is past int64 whatever the exponent, and no BigInt is built.
export function int64Value (negative: boolean, digits: string, zeros: number): number | bigint {
  if (digits.length + zeros > 19) return negative ? -BEYOND_INT64 : BEYOND_INT64
  const magnitude = BigInt(digits + '0'.repeat(zeros))
  if (magnitude > (negative ? INT64_MIN_MAGNITUDE : INT64_MAX)) return negative ? -BEYOND_INT64 : BEYOND_INT64
  if (magnitude <= SAFE_MAX) return negative ? -Number(magnitude) : Number(magnitude)
  return negative ? -magnitude : magnitude
}

// A JSON number from its double and its text: a whole one is a number while
// safe, an exact bigint within int64, else +-BEYOND_INT64; a fraction is its
// double, or NaN when the double rounded to a whole number (the validator
// refuses NaN as "must be integer"; such markers are never stored or echoed).
export function exactNumber (value: number, text: string): number | bigint {
  // A whole value always rounds to a whole double (or an infinite one), so a
  // finite double that is not whole is final; a safe integer written without
  // fraction or exponent is exact.
  if (Number.isSafeInteger(value) ? !/[.eE]/.test(text) : Number.isFinite(value) && !Number.isInteger(value)) return value + 0
  const [, sign, whole, fraction = '', exponent = '0'] = NUMBER.exec(text) as RegExpExecArray
  // value = digits * 10^(exponent - fraction length); loops, not regexes,
  // trim the zeros, so a long run of them costs its length only.
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
  return int64Value(sign === '-', digits.slice(first, last + 1), scale)
}

const NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/

// The Ajv format. 2^63 itself passes: the exact bigint INT64_MAX becomes
// that double in the validator's copy; the parser has checked the range
// exactly, and BEYOND_INT64 (far past 2^63) fails here.
export const int64Format = {
  type: 'number',
  validate: (n: number) => Number.isInteger(n) && Math.abs(n) <= 2 ** 63
} as const

function containsBigInt (value: unknown): boolean {
  if (typeof value === 'bigint') return true
  if (typeof value !== 'object' || value === null) return false
  if (Array.isArray(value)) return value.some(containsBigInt)
  // for…in, not Object.values: no array is made for every body.
  for (const key in value) {
    if (Object.hasOwn(value, key) && containsBigInt((value as Record<string, unknown>)[key])) return true
  }
  return false
}

// A copy of value in which bigints are numbers; the original is untouched.
function bigIntsAsNumbers (value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value)
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map(bigIntsAsNumbers)
  const copy: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) {
    Object.defineProperty(copy, key, { value: bigIntsAsNumbers(item), enumerable: true, writable: true, configurable: true })
  }
  return copy
}

// What the validator checks: the body itself, or a copy without bigints
// (still whole, and already range-checked) while the handler keeps the
// exact bigint.
export function forValidator (data: unknown): unknown {
  return containsBigInt(data) ? bigIntsAsNumbers(data) : data
}
