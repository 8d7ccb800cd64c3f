import { STATUS_CODES } from 'node:http'
import type { ErrorBody } from './schemas.js'

// What an error answer is made of, whoever sends it: the error handler
// (plugins/error-answers.ts), the answers Node's parser leaves to the server
// (plugins/http-edge.ts) and the metrics listener.

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'

// Seconds before retrying a 503 (or replaying a 504): a database that is down
// needs a while; a shutting-down or overloaded instance frees up at once.
export const RETRY_AFTER_SECONDS = { databaseUnavailable: 5, shuttingDown: 1, overloaded: 1 } as const

// An error that knows its HTTP status, a message written for the client (sent
// whatever the status) and the headers that go with it (Retry-After,
// WWW-Authenticate).
export class HttpError extends Error {
  constructor (readonly statusCode: number, message: string, readonly headers: Readonly<Record<string, string>> = {}) {
    super(message)
    this.name = 'HttpError'
  }
}

export const retryAfter = (seconds: number): Record<string, string> => ({ 'retry-after': String(seconds) })

export function errorBody (status: number, message?: string): ErrorBody {
  const text = message !== undefined && message.length > 0 ? message : (STATUS_CODES[status] ?? 'Error')
  return { error: status, message: text }
}

// The request id, so a caller can find its request in the logs, and nosniff,
// so no browser second-guesses a content type (a 404 echoes the URL).
export function everyAnswerHeaders (reqId: string): Record<string, string> {
  return { 'x-request-id': reqId, 'x-content-type-options': 'nosniff' }
}

// An error answer for a connection Fastify does not handle (malformed HTTP,
// CONNECT, an unmet Expect): its body and headers, Connection: close included.
export function rawError (status: number, reqId: string, message?: string): { body: string, headers: Record<string, string | number> } {
  const body = JSON.stringify(errorBody(status, message))
  const headers = { 'content-type': JSON_CONTENT_TYPE, ...everyAnswerHeaders(reqId), 'content-length': Buffer.byteLength(body), connection: 'close' }
  return { body, headers }
}
