import { Ajv, type ValidateFunction } from 'ajv'
import type { FastifySchemaCompiler } from 'fastify'
import { sharedSchemas } from '../../src/schemas.js'
import { forValidator, int64Format } from './int64.js'

// Our own Ajv rather than Fastify's default, for two reasons:
// - no type coercion: Fastify's default turns "7" into 7 and null into "".
// - ids past 2^53 arrive from the JSON parser as bigint, which Ajv does not
//   know: the int64 rule (int64.ts) says how they are checked.
const ajv = new Ajv({
  coerceTypes: false,
  useDefaults: false,
  removeAdditional: false,
  allErrors: false,
  strict: true,
  formats: {
    int64: int64Format,
    int32: { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -2147483648 && n <= 2147483647 }
  }
})
for (const schema of sharedSchemas) ajv.addSchema(schema)

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema }) => {
  const validate: ValidateFunction = ajv.compile(schema as object)
  return (data: unknown) => {
    const ok = validate(forValidator(data))
    return ok ? { value: data } : { error: validate.errors as never }
  }
}

// PostgreSQL text cannot hold U+0000, and a lone UTF-16 surrogate cannot be
// encoded as UTF-8 at all (Node would write U+FFFD). Either would mean storing
// something other than what the client sent, so such strings are refused.
export function isStorableText (text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed()
}

// The first stored string field that cannot be stored exactly, if any.
export function unstorableField (plant: { name: string, tag?: string | undefined }): 'name' | 'tag' | undefined {
  if (!isStorableText(plant.name)) return 'name'
  if (plant.tag !== undefined && !isStorableText(plant.tag)) return 'tag'
  return undefined
}
