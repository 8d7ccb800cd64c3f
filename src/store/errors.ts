// Database failures that mean "try again later" rather than "this request is
// wrong" or "the code is wrong". The error handler answers them with 503.
export class StoreUnavailableError extends Error {
  readonly statusCode = 503
  constructor (message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'StoreUnavailableError'
  }
}

const networkCodes = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH',
  'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'ECONNABORTED'
])

// SQLSTATE codes of a server that is going away, overloaded or cancelled the
// statement (statement_timeout); class 08 is "connection exception".
const unavailableStates = new Set(['57P01', '57P02', '57P03', '53300', '57014', '53000', '53100', '53200'])

const unavailableMessages = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Client has encountered a connection error',
  'Connection ended',
  'connection timeout',
  'PGlite is closed',
  'Cannot use a pool after calling end'
]

export function isUnavailable (err: unknown): boolean {
  if (err instanceof StoreUnavailableError) return true
  if (!(err instanceof Error)) return false
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string') {
    if (networkCodes.has(code) || unavailableStates.has(code) || code.startsWith('08')) return true
  }
  return unavailableMessages.some((m) => err.message.includes(m))
}

export function asStoreError (err: unknown): unknown {
  return isUnavailable(err) && !(err instanceof StoreUnavailableError)
    ? new StoreUnavailableError('The database is unavailable', { cause: err })
    : err
}
