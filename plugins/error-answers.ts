import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { ErrorBody } from '../src/schemas.js'
import { noteOutcome } from './logging/access-log.js'

// Every error answer on the API port is sent from here, whoever gives it
// (the metrics listener sends its own with errorBody).

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'

// The request id, so a caller can find its request in the logs, and
// nosniff, so no browser second-guesses a content type (a 404 echoes the URL).
export function everyAnswerHeaders (reqId: string): Record<string, string> {
  return { 'x-request-id': reqId, 'x-content-type-options': 'nosniff' }
}

// The onRequest hook that sets them on every answer Fastify gives.
export function addEveryAnswerHeaders (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  reply.headers(everyAnswerHeaders(request.id))
  done()
}

// Seconds before retrying a 503 (or replaying a 504): a database that is down
// needs a while; a shutting-down instance is replaced at once.
export const RETRY_AFTER_SECONDS = { databaseUnavailable: 5, shuttingDown: 1 } as const

// An error that already knows its HTTP status and a message written for the
// client: the message reaches the client whatever the status. A delay it
// knows (a 429's window) becomes Retry-After.
export class HttpError extends Error {
  constructor (readonly statusCode: number, message: string, readonly retryAfterSeconds?: number) {
    super(message)
    this.name = 'HttpError'
  }
}

function statusOf (err: FastifyError): number {
  if (err.validation !== undefined) return 400
  const status = err.statusCode
  return typeof status === 'number' && status >= 400 && status <= 599 ? status : 500
}

export function errorBody (status: number, message?: string): ErrorBody {
  const text = message !== undefined && message.length > 0 ? message : (STATUS_CODES[status] ?? 'Error')
  return { error: status, message: text }
}

// The one way an error answer leaves through Fastify.
export function sendError (reply: FastifyReply, status: number, message?: string, retryAfterSeconds?: number): FastifyReply {
  if (retryAfterSeconds !== undefined) reply.header('retry-after', String(retryAfterSeconds))
  return reply.code(status).type(JSON_CONTENT_TYPE).send(errorBody(status, message))
}

// The same answer for a connection Fastify does not handle (malformed HTTP,
// an unmet Expect): the body and the headers, Connection: close included.
export function rawError (status: number, reqId: string, message?: string): { body: string, headers: Record<string, string | number> } {
  const body = JSON.stringify(errorBody(status, message))
  return {
    body,
    headers: {
      'content-type': JSON_CONTENT_TYPE,
      ...everyAnswerHeaders(reqId),
      'content-length': Buffer.byteLength(body),
      connection: 'close'
    }
  }
}

// The 5xx the database causes: logged at warn, and the client's message when
// the error is not an HttpError; both come with the database's Retry-After.
const DATABASE_ANSWERS: Record<number, { line: string, message: string }> = {
  503: { line: 'service unavailable', message: 'The database is unavailable; retry later' },
  // A write sent and not confirmed (src/store/store-errors.ts): it may
  // still commit, so the caller is told to replay, never "nothing stored".
  504: { line: 'outcome unknown', message: 'The database did not confirm the write in time: outcome unknown; replaying this create tells' }
}

// The one place every thrown error becomes the Error body: validation, the
// JSON parser, bearer auth, Fastify's own checks and the database. 5xx details
// stay in the log (with the request id); the client gets a generic message
// unless the error is an HttpError, whose message (and delay) was written for it.
export function errorHandler (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const status = statusOf(err)
  const chosen = err instanceof HttpError ? err : undefined
  if (status < 500) {
    request.log.info({ status, code: err.code, reason: err.message }, 'request rejected')
    sendError(reply, status, err.message, chosen?.retryAfterSeconds)
    return
  }
  const database = DATABASE_ANSWERS[status]
  if (database === undefined) request.log.error({ err }, 'request failed')
  else request.log.warn({ err }, database.line)
  if (status === 504) noteOutcome(request, 'unknown')
  const message = chosen?.message ?? database?.message ?? STATUS_CODES[status] ?? 'Internal Server Error'
  const retryAfter = chosen?.retryAfterSeconds ?? (database === undefined ? undefined : RETRY_AFTER_SECONDS.databaseUnavailable)
  sendError(reply, status, message, retryAfter)
}

// Errors Fastify raises before routing (a URL that does not decode): no
// hook has run, so the headers every answer carries are set here.
export function frameworkErrorHandler (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.headers(everyAnswerHeaders(request.id))
  errorHandler(err, request, reply)
}

// No route for this method and path: 405 with Allow when the path has
// routes for other methods (`allowed`, from answerUnroutedBeforeBody in http-edge/http-rules.ts), else 404.
export function notFoundHandler (request: FastifyRequest, reply: FastifyReply, allowed?: readonly string[]): void {
  if (allowed !== undefined && allowed.length > 0) {
    const path = request.url.split('?')[0] ?? ''
    reply.header('allow', allowed.join(', '))
    sendError(reply, 405, `Method ${request.method.slice(0, 20)} is not allowed on ${path.slice(0, 100)}; use ${allowed.join(' or ')}`)
    return
  }
  const route = `${request.method} ${request.url}`.slice(0, 200)
  sendError(reply, 404, `Route ${route} not found`)
}
