import { Type, type Static } from '@sinclair/typebox'

// Each $id names the OpenAPI component; routes point at it with Type.Ref.

// PostgreSQL text cannot hold U+0000, and a lone UTF-16 surrogate has no UTF-8 form: either would store other
// than what was sent. In the schema, so the document states the rule and the validator names the field.
export const STORABLE_TEXT = '^[^\\u0000\\uD800-\\uDFFF]*$'
const storable = { pattern: STORABLE_TEXT }

export const Plant = Type.Object({
  name: Type.String({ description: 'The name of the plant', ...storable }),
  tag: Type.Optional(Type.String({ description: 'Tag to specify the type', ...storable }))
}, { $id: 'Plant', description: 'A plant in the store.' })
export type Plant = Static<typeof Plant>

// Ids past 2^53 arrive as bigint.
export const PlantId = Type.Unsafe<number | bigint>({
  type: 'integer',
  format: 'int64',
  description: 'Identification number of the plant: a signed 64-bit integer, stored exactly. Send it as a bare JSON ' +
    'number (a string is refused). JavaScript callers: a `number` is exact only up to 2^53-1 (9007199254740991), and ' +
    'JSON.stringify writes a larger id rounded, so another plant would be stored. Use the plant store client ' +
    '(`client/` in the repository; bigint ids), or on Node 22+ write the id with `JSON.rawJSON(\'9007199254740993\')`.'
})

export const EXAMPLE_PLANT = { id: 1, name: 'Monstera', tag: 'indoor' }

// Plant's fields plus `id`, as one object: Swagger UI labels an allOf of a $ref and an object "(any & object)" until
// it is expanded. Unknown properties stay allowed because the specification does not forbid them.
export const NewPlant = Type.Object({ id: PlantId, ...Plant.properties }, {
  $id: 'NewPlant',
  description: 'A plant to add to the store.',
  // The start-up banner's curl sends it too, so "Try it out" after it is a replay (200).
  examples: [EXAMPLE_PLANT]
})

export const ErrorBody = Type.Object({
  error: Type.Integer({ format: 'int32', minimum: 400, maximum: 599, description: 'Numeric error value (the HTTP status)' }),
  message: Type.String({ description: 'Error message text' })
}, { $id: 'Error', description: 'What went wrong.' })
export type ErrorBody = Static<typeof ErrorBody>

export const sharedSchemas = [Plant, NewPlant, ErrorBody]
