import contentType from 'content-type'
import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpError } from '../error-answers.js'
import { sharedSchemas } from '../../src/schemas.js'
import { parseJsonBody } from './json-parser.js'
import { validatorCompiler } from './validation.js'

// The request body: its media type is checked by the route (requireJson),
// only JSON is parsed (json-parser.ts), and it is validated without
// coercion against the shared schemas (validation.ts).
async function jsonBody (fastify: FastifyInstance): Promise<void> {
  fastify.setValidatorCompiler(validatorCompiler)
  for (const schema of sharedSchemas) fastify.addSchema(schema)
  // Fastify's text/plain parser would otherwise let other media types
  // through to validation.
  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as Buffer))
    } catch (err) {
      done(err as Error, undefined)
    }
  })
}

// POST bodies must be JSON in UTF-8; checked before the body is read so a
// wrong media type costs nothing and answers 415 whether or not a body came.
export function requireJson (request: FastifyRequest): void {
  const header = request.headers['content-type']
  if (header === undefined) throw new HttpError(415, 'Content-Type must be application/json (none was sent)')
  // What nearly every caller sends: nothing to parse.
  if (header === 'application/json') return
  let parsed: contentType.ParsedMediaType
  try {
    parsed = contentType.parse(header)
  } catch {
    throw new HttpError(415, 'Content-Type must be application/json (the header is malformed)')
  }
  if (parsed.type !== 'application/json') {
    throw new HttpError(415, `Content-Type must be application/json, not ${parsed.type.slice(0, 100)}`)
  }
  const charset = parsed.parameters.charset?.toLowerCase()
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new HttpError(415, 'Content-Type charset must be utf-8')
  }
}

export default fp(jsonBody, { name: 'json-body', fastify: '5.x' })
