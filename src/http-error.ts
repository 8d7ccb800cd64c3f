import { STATUS_CODES } from 'node:http'
import type { ErrorBody } from './schemas.js'

// What an error answer is made of, whoever sends it.

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'

// Seconds before retrying a 503 (or replaying a 504): a database that is down
// needs a while; a shutting-down or overloaded instance frees up at once.
export const RETRY_AFTER_SECONDS = { databaseUnavailable: 5, shuttingDown: 1, overloaded: 1 } as const

// Its message is written for the client, and sent whatever the status.
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
