import { Ajv, type ValidateFunction } from 'ajv'
import type { FastifySchemaCompiler } from 'fastify'
import { sharedSchemas } from '../schemas.js'

// Our own Ajv rather than Fastify's default, for two reasons:
// - no type coercion: Fastify's default turns "7" into 7 and null into "".
// - ids past 2^53 arrive from the JSON parser as bigint, which Ajv does not
//   know; the validator sees them as numbers (still whole, and the parser has
//   already checked the int64 range exactly) while the handler keeps the
//   exact bigint.
const ajv = new Ajv({
  coerceTypes: false,
  useDefaults: false,
  removeAdditional: false,
  allErrors: false,
  strict: true,
  formats: {
    // 2^63 itself passes: the exact bigint INT64_MAX becomes that double
    // here; the parser has checked the range exactly and marks ids past it
    // with BEYOND_INT64 (src/json.ts), which fails.
    int64: { type: 'number', validate: (n: number) => Number.isInteger(n) && Math.abs(n) <= 2 ** 63 },
    int32: { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -2147483648 && n <= 2147483647 }
  }
})
for (const schema of sharedSchemas) ajv.addSchema(schema)

function containsBigInt (value: unknown): boolean {
  if (typeof value === 'bigint') return true
  if (typeof value !== 'object' || value === null) return false
  for (const item of Array.isArray(value) ? value : Object.values(value)) {
    if (containsBigInt(item)) return true
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

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema }) => {
  const validate: ValidateFunction = ajv.compile(schema as object)
  return (data: unknown) => {
    const ok = validate(containsBigInt(data) ? bigIntsAsNumbers(data) : data)
    return ok ? { value: data } : { error: validate.errors as never }
  }
}
