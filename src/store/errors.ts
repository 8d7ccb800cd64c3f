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
// 3D000: the database named in DATABASE_URL does not exist yet (a deploy
// step creates it after the service starts): waited for like a server
// that is not up yet.
export const DATABASE_MISSING = '3D000'
const unavailableStates = new Set(['57P01', '57P02', '57P03', '53300', '57014', '53000', '53100', '53200', DATABASE_MISSING])

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

// The SQLSTATE of a database error, or of the one a StoreUnavailableError wraps.
export function sqlState (err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string') return code
  }
  return undefined
}
