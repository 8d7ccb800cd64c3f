import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { sharedSchemas } from '../../src/schemas.js'
import { parseJsonBody } from './json-parser.js'
import { validatorCompiler } from './validation.js'

// The request body: only JSON is parsed (json-parser.ts), and it is
// validated without coercion against the shared schemas
// (validation.ts).
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

export default fp(jsonBody, { name: 'json-body', fastify: '5.x' })
