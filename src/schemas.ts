import { Type, type Static } from '@sinclair/typebox'

// Each schema carries an $id: Fastify adds it once, routes point at it with
// Type.Ref, and the docs plugin names the OpenAPI component after it.

// PostgreSQL text cannot hold U+0000, and a lone UTF-16 surrogate has no
// UTF-8 form (Node would write U+FFFD): either would store something other
// than what was sent. In the schema, so the document states the rule and the
// validator names the field (plugins/json-body.ts words its message).
export const STORABLE_TEXT = '^[^\\u0000\\uD800-\\uDFFF]*$'
const storable = { pattern: STORABLE_TEXT }

export const Plant = Type.Object({
  name: Type.String({ description: 'The name of the plant', ...storable }),
  tag: Type.Optional(Type.String({ description: 'Tag to specify the type', ...storable }))
}, {
  $id: 'Plant',
  description: 'A plant in the store.'
})
export type Plant = Static<typeof Plant>

// The JSON body parser hands over ids past 2^53 as bigint, so the static
// type admits both; validation checks the JSON type and the int64 range.
export const PlantId = Type.Unsafe<number | bigint>({
  type: 'integer',
  format: 'int64',
  description: 'Identification number of the plant: a signed 64-bit integer, stored exactly. ' +
    'Send it as a bare JSON number (a string is refused). JavaScript callers: a `number` is exact ' +
    'only up to 2^53-1 (9007199254740991), and JSON.stringify writes a larger id rounded, so another ' +
    'plant would be stored. Use the plant store client (`client/` in the repository; bigint ids), or ' +
    'on Node 22+ write the id with `JSON.rawJSON(\'9007199254740993\')`.'
})

export const EXAMPLE_PLANT = { id: 1, name: 'Monstera', tag: 'indoor' }

// NewPlant is Plant plus `id`. An allOf of the Plant reference and the id part
// reads that way in the OpenAPI document; unknown properties stay allowed
// because the specification does not forbid them.
export const NewPlant = Type.Intersect([
  Type.Ref(Plant),
  Type.Object({ id: PlantId })
], {
  $id: 'NewPlant',
  description: 'A plant to add to the store.',
  // Also the request body's example in the docs; the start-up banner's curl
  // sends this same plant, so "Try it out" after it is a replay (200).
  examples: [EXAMPLE_PLANT]
})

export const ErrorBody = Type.Object({
  error: Type.Integer({ format: 'int32', description: 'Numeric error value (the HTTP status)' }),
  message: Type.String({ description: 'Error message text' })
}, {
  $id: 'Error',
  description: 'What went wrong.'
})
export type ErrorBody = Static<typeof ErrorBody>

export const sharedSchemas = [Plant, NewPlant, ErrorBody]
