import contentType from 'content-type'
import type { FastifyRequest } from 'fastify'
import { HttpError } from '../error-answers.js'

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
