import contentType from 'content-type'
import fp from 'fastify-plugin'
import { Ajv } from 'ajv'
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchemaCompiler, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import { withAnswers, type Answers } from '../src/documented-answers.js'
import { HttpError } from '../src/http-error.js'
import { bigIntsAsNumbers, parseJsonBody } from '../src/json-body.js'
import { STORABLE_TEXT, sharedSchemas } from '../src/schemas.js'

// The JSON body of every route that takes one: its media type (415), its parse (400, 413) and its validation (400).

// Our own Ajv, with its defaults: Fastify's coerces types ("7" into 7, null into ""). The int64 format is the range
// rule for ids; the parser has already checked the range exactly.
const ajv = new Ajv({
  strict: true,
  formats: {
    // 2^63 passes, because INT64_MAX becomes 2^63 as a double.
    int64: { type: 'number', validate: (n: number) => Number.isInteger(n) && Math.abs(n) <= 2 ** 63 },
    int32: { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -2147483648 && n <= 2147483647 }
  }
})
for (const schema of sharedSchemas) ajv.addSchema(schema)

const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema }) => {
  const validate = ajv.compile(schema as object)
  return (data: unknown) => {
    if (validate(data)) return { value: data }
    // Ajv knows no bigint, which the parser gives for an id past 2^53. A body that holds one is checked again as a
    // copy with numbers; the handler still gets the exact bigint.
    const numbers = bigIntsAsNumbers(data)
    if (numbers !== data && validate(numbers)) return { value: data }
    for (const error of validate.errors ?? []) {
      if (error.keyword === 'pattern' && error.params.pattern === STORABLE_TEXT) error.message = 'must not contain U+0000 or an unpaired UTF-16 surrogate'
    }
    return { error: validate.errors as never }
  }
}

// The answers every route with a body may give before its handler runs. The edge answers 408 and 501, for a body
// that does not arrive in time or comes in a transfer coding it cannot read; they are documented here, with the rest.
const BODY_ANSWERS: Answers = {
  400: {
    when: 'The body is not valid JSON (or not UTF-8, or has a key twice), not an object, or not what the operation ' +
      'takes; the message names the field and the rule.',
    retry: 'Nothing was stored. Do not retry unchanged: fix the request.',
    message: 'Body is not valid JSON: Unexpected end of JSON input'
  },
  408: {
    when: 'The request did not arrive in time (its headers within 10 s, the whole of it within 30 s); the connection is closed.',
    retry: 'Nothing was stored. Safe to retry, sending the request faster.',
    message: 'Request Timeout'
  },
  413: {
    when: 'The body is larger than the configured limit (1 MiB unless the service is configured otherwise).',
    retry: 'Nothing was stored. Do not retry unchanged.',
    message: 'Request body is too large'
  },
  415: {
    when: 'The Content-Type is not application/json (parameters such as charset=utf-8 are allowed, and so are empty ' +
      'ones; another charset is not).',
    retry: 'Nothing was stored. Do not retry unchanged: send Content-Type: application/json.',
    message: 'Content-Type must be application/json (none was sent)'
  },
  501: {
    when: 'The body is sent with a Transfer-Encoding other than chunked (gzip, chunked, for example); the body is not ' +
      'read and the connection is closed.',
    retry: 'Nothing was stored. Do not retry unchanged: send the body as it is, or chunked.',
    message: 'Transfer-Encoding gzip, chunked is not implemented: send the body as it is, or chunked'
  }
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH'])
const takesBody = (route: RouteOptions): boolean =>
  route.schema?.body !== undefined || [route.method].flat().some((method) => BODY_METHODS.has(method))

// An onRequest hook of every route with a body: 415 unless the body is JSON, before a byte of it is read. Then, as
// the body is wanted, 100 Continue if the client asked for it: the edge left that answer to the service.
function requireJsonBody (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const refused = mediaTypeError(request.headers['content-type'])
  if (refused !== undefined) return done(refused)
  const req = request.raw
  if (req.headers.expect !== undefined && req.httpVersionMinor === 1 && !reply.raw.headersSent) reply.raw.writeContinue()
  done()
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
  // Registered at the root, so this sees every route. Its hook goes first among the route's own: auth and load
  // shedding run before it (they are hooks of the routes' context), and the rate limit, added later, after it.
  fastify.addHook('onRoute', (route) => {
    if (!takesBody(route)) return
    route.onRequest = [requireJsonBody, ...[route.onRequest ?? []].flat()]
    route.config = withAnswers(route.config, BODY_ANSWERS)
  })
}

// RFC 9110 5.6.6 allows empty parameters (`application/json;`), which the content-type package does not: they are
// dropped first.
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
