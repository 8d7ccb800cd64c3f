import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import type { ErrorBody } from './schemas.js'

// Seconds a client should wait before retrying after a 503.
export const RETRY_AFTER_SECONDS = 5
export const UNAVAILABLE_MESSAGE = 'The database is unavailable; retry later'

export function statusOf (err: FastifyError): number {
  if (err.validation !== undefined) return 400
  const status = err.statusCode
  return typeof status === 'number' && status >= 400 && status <= 599 ? status : 500
}

export function errorBody (status: number, message?: string): ErrorBody {
  const text = message !== undefined && message.length > 0 ? message : (STATUS_CODES[status] ?? 'Error')
  return { error: status, message: text }
}

// The one place every error becomes the Error body: validation, the JSON
// parser, bearer auth, Fastify's own checks and the database. 5xx details
// stay in the log (with the request id); the client gets a generic message.
export function errorHandler (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const status = statusOf(err)
  let message = err.message
  if (status === 503) {
    request.log.warn({ err }, 'service unavailable')
    reply.header('retry-after', String(RETRY_AFTER_SECONDS))
    message = UNAVAILABLE_MESSAGE
  } else if (status >= 500) {
    request.log.error({ err }, 'request failed')
    message = STATUS_CODES[status] ?? 'Internal Server Error'
  } else {
    request.log.info({ status, code: err.code, reason: err.message }, 'request rejected')
  }
  reply.code(status).type('application/json; charset=utf-8').send(errorBody(status, message))
}

// Errors Fastify raises before routing (a URL that does not decode): no
// hook has run, so the request id header is set here.
export function frameworkErrorHandler (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id)
  errorHandler(err, request, reply)
}

export function notFoundHandler (request: FastifyRequest, reply: FastifyReply): void {
  const route = `${request.method} ${request.url}`.slice(0, 200)
  reply.code(404).type('application/json; charset=utf-8').send(errorBody(404, `Route ${route} not found`))
}
