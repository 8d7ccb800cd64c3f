import t from 'tap'
import { buildStubApp, postPlant } from '../helper.js'

// The served document checked against the specification the service
// implements, written out here by hand: if a
// schema or route drifts from the spec, these fail even when openapi.json
// was regenerated to match.

type Json = Record<string, any>

const SCHEMAS = '#/components/schemas/'
const COMPONENTS = '#/components/'

// A schema, header or other component named by a local reference.
function component (doc: Json, ref: unknown): Json {
  if (typeof ref !== 'string' || !ref.startsWith(COMPONENTS)) throw new Error(`not a component reference: ${String(ref)}`)
  const [kind, name, ...rest] = ref.slice(COMPONENTS.length).split('/')
  const found = rest.length === 0 ? doc.components?.[kind as string]?.[name as string] : undefined
  if (found === undefined) throw new Error(`dangling reference ${ref}`)
  return found
}

// Properties and required names of an object schema, following $ref and
// allOf the way a client generator does.
function flatten (doc: Json, schema: Json): { properties: Json, required: string[] } {
  if (schema.$ref !== undefined) return flatten(doc, component(doc, schema.$ref))
  const properties: Json = { ...(schema.properties ?? {}) }
  const required = new Set<string>(schema.required ?? [])
  for (const part of schema.allOf ?? []) {
    const inner = flatten(doc, part)
    Object.assign(properties, inner.properties)
    for (const name of inner.required) required.add(name)
  }
  return { properties, required: [...required].sort() }
}

// Only the keywords the spec speaks about: type and format.
function shape (properties: Json): Json {
  return Object.fromEntries(Object.entries(properties).map(([name, p]) => [
    name, p.format === undefined ? { type: p.type } : { type: p.type, format: p.format }
  ]))
}

function allRefs (value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => allRefs(v, found))
  else if (typeof value === 'object' && value !== null) {
    for (const [key, v] of Object.entries(value)) {
      if (key === '$ref' && typeof v === 'string') found.push(v)
      else allRefs(v, found)
    }
  }
  return found
}

t.test('the served document follows the spec', async (t) => {
  const { app } = await buildStubApp(t)
  const doc = JSON.parse((await app.inject({ method: 'GET', url: '/openapi.json' })).body) as Json
  const post = doc.paths?.['/plants']?.post as Json

  t.test('OpenAPI 3.1.0, interface version 1.0.0', async (t) => {
    t.equal(doc.openapi, '3.1.0')
    t.equal(doc.info.version, '1.0.0')
    t.match(doc.info.title, /plant store/i)
    t.ok(typeof doc.info.description === 'string' && doc.info.description.length > 0, 'has a description')
  })

  t.test('components are named Plant, NewPlant and Error, nothing generated', async (t) => {
    t.same(Object.keys(doc.components.schemas).sort(), ['Error', 'NewPlant', 'Plant'])
    for (const ref of allRefs(doc)) {
      t.doesNotThrow(() => component(doc, ref), `${ref} resolves`)
    }
  })

  t.test('Plant: name string required, tag string optional, no id', async (t) => {
    const plant = flatten(doc, doc.components.schemas.Plant)
    t.equal(doc.components.schemas.Plant.type, 'object')
    t.same(shape(plant.properties), { name: { type: 'string' }, tag: { type: 'string' } })
    t.same(plant.required, ['name'])
  })

  t.test('NewPlant: one object, every field of Plant plus id integer/int64', async (t) => {
    const schema = doc.components.schemas.NewPlant
    // Swagger UI labels an allOf of a $ref and an object "(any & object)" until it is expanded.
    t.equal(schema.type, 'object', 'one object, as Swagger UI shows it with its fields')
    t.equal(schema.allOf, undefined, 'no allOf')
    t.same(Object.keys(schema.properties), ['id', 'name', 'tag'], 'the id first, then the plant\'s fields')
    const newPlant = flatten(doc, schema)
    t.same(shape(newPlant.properties), {
      name: { type: 'string' },
      tag: { type: 'string' },
      id: { type: 'integer', format: 'int64' }
    })
    t.same(newPlant.required, ['id', 'name'])
    t.not(schema.additionalProperties, false, 'unknown properties stay allowed, as the spec allows')
  })

  t.test('Error: error integer/int32 and message string, both required', async (t) => {
    const error = flatten(doc, doc.components.schemas.Error)
    t.equal(doc.components.schemas.Error.type, 'object')
    t.same(shape(error.properties), { error: { type: 'integer', format: 'int32' }, message: { type: 'string' } })
    t.same(error.required, ['error', 'message'])
  })

  t.test('POST /plants: required NewPlant JSON body, 200 Plant, 400 Error', async (t) => {
    t.ok(post, 'POST /plants is documented')
    t.equal(post.operationId, 'createPlant')
    t.ok(typeof post.summary === 'string' && post.summary.length > 0, 'has a summary')
    t.ok(Array.isArray(post.tags) && post.tags.length > 0, 'has a tag')
    t.equal(post.requestBody.required, true)
    t.same(Object.keys(post.requestBody.content), ['application/json'])
    t.same(post.requestBody.content['application/json'].schema, { $ref: `${SCHEMAS}NewPlant` })
    t.same(Object.keys(post.responses['200'].content), ['application/json'])
    t.same(post.responses['200'].content['application/json'].schema, { $ref: `${SCHEMAS}Plant` })
    t.same(post.responses['400'].content['application/json'].schema, { $ref: `${SCHEMAS}Error` })
  })

  t.test('every other status the service answers is documented with Error', async (t) => {
    t.same(Object.keys(post.responses).sort(), ['200', '400', '401', '408', '409', '413', '415', '500', '501', '503', '504'])
    for (const [status, response] of Object.entries(post.responses as Json)) {
      t.ok(typeof response.description === 'string' && response.description.length > 0, `${status} says when`)
      if (status === '200') continue
      t.same(Object.keys(response.content), ['application/json'], `${status} is JSON`)
      t.same(response.content['application/json'].schema, { $ref: `${SCHEMAS}Error` }, `${status} is an Error`)
    }
  })

  t.test('the request body example is a NewPlant the service accepts', async (t) => {
    const example = post.requestBody.content['application/json'].example
    t.match(example, { id: Number, name: String, tag: String }, 'an id, a name and a tag')
    const res = await postPlant(app, JSON.stringify(example))
    t.equal(res.statusCode, 200)
    t.same(JSON.parse(res.body), { name: example.name, tag: example.tag })
  })

  t.test('bearer security is the http bearer scheme, required by every operation', async (t) => {
    t.same(doc.components.securitySchemes.bearerAuth, {
      ...doc.components.securitySchemes.bearerAuth,
      type: 'http',
      scheme: 'bearer'
    })
    let operations = 0
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const [method, operation] of Object.entries(item as Json)) {
        operations++
        t.same(operation.security ?? doc.security, [{ bearerAuth: [] }], `${method} ${path} requires bearerAuth`)
        // What the document says is guarded really is.
        const res = await app.inject({ method: method.toUpperCase() as 'POST', url: path })
        t.equal(res.statusCode, 401, `${method} ${path} answers 401 without a token`)
      }
    }
    t.equal(operations, 1, 'POST /plants is the one operation')
  })

  t.test('public endpoints are deliberately left out of the document', async (t) => {
    t.same(Object.keys(doc.paths), ['/plants'])
  })
})
