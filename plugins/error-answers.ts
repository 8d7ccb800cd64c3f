import fp from 'fastify-plugin'
import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { STORE_WRITE_ANSWERS } from '../src/documented-answers.js'
import { errorBody, everyAnswerHeaders, HttpError, JSON_CONTENT_TYPE, RETRY_AFTER_SECONDS, retryAfter } from '../src/http-error.js'

// Every error answer Fastify gives leaves from here. An HttpError's message and headers were written for the client;
// any other 5xx gets a generic message, its details in the log with the request id.

// The 5xx the database causes: at warn, with the answers table's message and Retry-After.
// A 504 may still commit (src/store/store-errors.ts), so its caller is told to replay.
const DATABASE_ANSWERS: Record<number, { line: string, message: string }> = {
  503: { line: 'service unavailable', message: STORE_WRITE_ANSWERS[503].message },
  504: { line: 'outcome unknown', message: STORE_WRITE_ANSWERS[504].message }
}

// What the handler reads of an error: Fastify's, a plugin's, or an HttpError.
type AnyError = Error & Partial<Pick<FastifyError, 'statusCode' | 'code' | 'validation'>>

export function errorHandler (err: AnyError, request: FastifyRequest, reply: FastifyReply): void {
  const code = err.statusCode
  const status = err.validation !== undefined ? 400 : typeof code === 'number' && code >= 400 && code <= 599 ? code : 500
  const chosen = err instanceof HttpError ? err : undefined
  let message = err.message
  // An HttpError is an answer the service chose (a 503 while shutting down included): no stack.
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

// A URL's path without its query: answers and log lines name the path, never what a query carries (a token).
export const pathOf = (url: string): string => url.split('?', 1)[0] as string

// Errors Fastify raises before routing (a URL that does not decode): no hook has run, so every answer's headers are
// set here. Fastify's own message quotes the whole URL, query included; this one names the path only.
export function frameworkErrorHandler (err: AnyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.headers(everyAnswerHeaders(request.id))
  const path = pathOf(request.url).slice(0, 100)
  const message = err.code === 'FST_ERR_BAD_URL'
    ? `The URL path ${path} does not decode: a %-escape in it is malformed`
    : `The URL path ${path} cannot be routed`
  errorHandler(new HttpError(err.statusCode ?? 400, message), request, reply)
}

// The edge answers an unrouted request before its body is read (plugins/http-edge.ts); the not-found handler, the rest.
export const notFound = (request: FastifyRequest): HttpError =>
  new HttpError(404, `Route ${request.method.slice(0, 20)} ${pathOf(request.url).slice(0, 180)} not found`)

async function errorAnswers (fastify: FastifyInstance): Promise<void> {
  fastify.setErrorHandler(errorHandler)
  fastify.setNotFoundHandler((request, reply) => { errorHandler(notFound(request), request, reply) })
}

export default fp(errorAnswers, { name: 'error-answers', fastify: '5.x' })
