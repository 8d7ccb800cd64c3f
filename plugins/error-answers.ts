import fp from 'fastify-plugin'
import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { errorBody, everyAnswerHeaders, HttpError, JSON_CONTENT_TYPE, RETRY_AFTER_SECONDS, retryAfter } from '../src/http-error.js'

// Every error answer Fastify gives leaves from here, whoever raised it:
// validation, the JSON reader, bearer auth, the edge's rules, Fastify's own
// checks and the database. 5xx details stay in the log (with the request id);
// the client gets a generic message unless the error is an HttpError, whose
// message and headers were written for it.

// The 5xx the database causes: logged at warn, with the client's message
// when the error is not an HttpError, and the database's Retry-After.
const DATABASE_ANSWERS: Record<number, { line: string, message: string }> = {
  503: { line: 'service unavailable', message: 'The database is unavailable; retry later' },
  // A write sent and not confirmed (src/store/store-errors.ts): it may
  // still commit, so the caller is told to replay, never "nothing stored".
  504: { line: 'outcome unknown', message: 'The database did not confirm the write in time: outcome unknown; replaying this create tells' }
}

// What the handler reads of an error: Fastify's, a plugin's, or an HttpError.
type AnyError = Error & Partial<Pick<FastifyError, 'statusCode' | 'code' | 'validation'>>

function statusOf (err: AnyError): number {
  if (err.validation !== undefined) return 400
  const status = err.statusCode
  return typeof status === 'number' && status >= 400 && status <= 599 ? status : 500
}

export function errorHandler (err: AnyError, request: FastifyRequest, reply: FastifyReply): void {
  const status = statusOf(err)
  const chosen = err instanceof HttpError ? err : undefined
  let message = err.message
  // An HttpError is an answer the service chose (a 503 while shutting down
  // or overloaded included): no stack in the log.
  if (status < 500 || chosen !== undefined) {
    request.log.info({ status, code: err.code, reason: err.message }, 'request rejected')
  } else {
    const database = DATABASE_ANSWERS[status]
    if (database === undefined) request.log.error({ err }, 'request failed')
    else request.log.warn({ err }, database.line)
    if (status === 504) request.createOutcome = 'unknown'
    message = database?.message ?? STATUS_CODES[status] ?? 'Internal Server Error'
    if (database !== undefined) reply.headers(retryAfter(RETRY_AFTER_SECONDS.databaseUnavailable))
  }
  if (chosen !== undefined) reply.headers(chosen.headers)
  reply.code(status).type(JSON_CONTENT_TYPE).send(errorBody(status, message))
}

// Errors Fastify raises before routing (a URL that does not decode): no
// hook has run, so the headers every answer carries are set here.
export function frameworkErrorHandler (err: AnyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.headers(everyAnswerHeaders(request.id))
  errorHandler(err, request, reply)
}

// No route for this method and path. The edge answers such a request before
// its body is read (plugins/http-edge.ts); this handler answers what a route
// hands on (a file @fastify/static does not have).
export const notFound = (request: FastifyRequest): HttpError =>
  new HttpError(404, `Route ${`${request.method} ${request.url}`.slice(0, 200)} not found`)

async function errorAnswers (fastify: FastifyInstance): Promise<void> {
  fastify.setErrorHandler(errorHandler)
  fastify.setNotFoundHandler((request, reply) => { errorHandler(notFound(request), request, reply) })
}

export default fp(errorAnswers, { name: 'error-answers', fastify: '5.x' })
