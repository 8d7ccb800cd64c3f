import contentType from 'content-type'
import fp from 'fastify-plugin'
import { Ajv } from 'ajv'
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchemaCompiler, HookHandlerDoneFunction } from 'fastify'
import { HttpError } from '../src/http-error.js'
import { forValidation, parseJsonBody } from '../src/json-body.js'
import { STORABLE_TEXT, sharedSchemas } from '../src/schemas.js'

declare module 'fastify' {
  interface FastifyInstance {
    // A route's onRequest hook: 415 unless the body is JSON, before a byte of it is read.
    requireJsonBody: (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void
  }
}

// Our own Ajv, with its defaults: Fastify's coerces types ("7" into 7, null into ""). Ids past 2^53 arrive as bigint,
// which Ajv does not know: it checks a copy (forValidation), and the int64 format is the range rule.
const ajv = new Ajv({
  strict: true,
  formats: {
    // 2^63 passes: INT64_MAX becomes it in the validator's copy; the reader checked the range exactly.
    int64: { type: 'number', validate: (n: number) => Number.isInteger(n) && Math.abs(n) <= 2 ** 63 },
    int32: { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -2147483648 && n <= 2147483647 }
  }
})
for (const schema of sharedSchemas) ajv.addSchema(schema)

const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema }) => {
  const validate = ajv.compile(schema as object)
  return (data: unknown) => {
    if (validate(forValidation(data))) return { value: data }
    for (const error of validate.errors ?? []) {
      if (error.keyword === 'pattern' && error.params.pattern === STORABLE_TEXT) error.message = 'must not contain U+0000 or an unpaired UTF-16 surrogate'
    }
    return { error: validate.errors as never }
  }
}

async function jsonBody (fastify: FastifyInstance): Promise<void> {
  fastify.setValidatorCompiler(validatorCompiler)
  for (const schema of sharedSchemas) fastify.addSchema(schema)
  // Fastify's text/plain parser would otherwise let other media types through.
  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as Buffer))
    } catch (err) {
      done(err as Error, undefined)
    }
  })
  fastify.decorate('requireJsonBody', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const refused = mediaTypeError(request.headers['content-type'])
    if (refused !== undefined) return done(refused)
    // The edge left 100 Continue to the service: sent once auth, routing and the media type passed.
    const req = request.raw
    if (req.headers.expect !== undefined && req.httpVersionMinor === 1 && !reply.raw.headersSent) reply.raw.writeContinue()
    done()
  })
}

// RFC 9110 5.6.6 allows empty parameters (`application/json;`), which the content-type package does not: dropped first.
function mediaTypeError (header: string | undefined): HttpError | undefined {
  if (header === 'application/json') return undefined
  if (header === undefined) return new HttpError(415, 'Content-Type must be application/json (none was sent)')
  let parsed: contentType.ParsedMediaType
  try {
    parsed = contentType.parse(header.replace(/;[ \t]*(?=;|$)/g, ''))
  } catch {
    return new HttpError(415, 'Content-Type must be application/json (the header is malformed)')
  }
  if (parsed.type !== 'application/json') return new HttpError(415, `Content-Type must be application/json, not ${parsed.type.slice(0, 100)}`)
  const charset = parsed.parameters.charset?.toLowerCase()
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') return new HttpError(415, 'Content-Type charset must be utf-8')
  return undefined
}

export default fp(jsonBody, { name: 'json-body', fastify: '5.x' })
