// A 503 means nothing was stored: the write was never sent, or the database refused it. A 504 means the write was
// sent and not confirmed, so it may still land; replaying the request tells.
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError'
  readonly statusCode = 503
}

export class OutcomeUnknownError extends Error {
  override name = 'OutcomeUnknownError'
  readonly statusCode = 504
}

const networkCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH',
  'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'ECONNABORTED'])

// A server going away, overloaded or cancelling the statement; class 08 is "connection exception". 3D000 means
// the database is not created yet, and it is waited for. 25006 comes from a standby or a demoted primary behind an
// HA proxy, which is not the request's fault.
export const DATABASE_MISSING = '3D000'
const unavailableStates = new Set(['57P01', '57P02', '57P03', '57P04', '57P05', '53300', '57014', '53000', '53100', '53200',
  DATABASE_MISSING, '25006'])

// The store itself was closed (shutdown): waiting will not bring it back.
const closedMessages = ['PGlite is closed', 'Cannot use a pool after calling end']

const unavailableMessages = [
  'Connection terminated', 'timeout exceeded when trying to connect', 'Query read timeout',
  'Client has encountered a connection error', 'Connection ended', 'connection timeout', ...closedMessages
]

// The database could not do what was asked (an unknown outcome is not: it may have).
export function isUnavailable (err: unknown): boolean {
  if (err instanceof StoreUnavailableError) return true
  if (err instanceof OutcomeUnknownError || !(err instanceof Error)) return false
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string' && (networkCodes.has(code) || unavailableStates.has(code) || code.startsWith('08'))) return true
  return unavailableMessages.some((m) => err.message.includes(m))
}

// A database that may come back (not a closed store, nor our own deadline, which has no cause), or an unknown outcome.
export function isTransient (err: unknown): boolean {
  if (!(err instanceof OutcomeUnknownError || isUnavailable(err))) return false
  const cause = err instanceof StoreUnavailableError || err instanceof OutcomeUnknownError ? err.cause : err
  return cause instanceof Error && !closedMessages.some((m) => cause.message.includes(m))
}

export function asStoreError (err: unknown): unknown {
  return isUnavailable(err) && !(err instanceof StoreUnavailableError)
    ? new StoreUnavailableError('The database is unavailable', { cause: err })
    : err
}

// A write that was sent: severity ERROR is a refusal, nothing committed. Anything else (no reply in time, a lost
// connection, a FATAL while a commit waits for a standby) may have come after the commit: unknown.
export function sentWriteError (err: unknown): unknown {
  const severity = (err as { severity?: unknown } | null)?.severity
  // pg refuses, unsent, a statement on a connection it knows is broken.
  const notSent = err instanceof Error && err.message.includes('is not queryable')
  if (severity === 'ERROR' || notSent) return asStoreError(err)
  return new OutcomeUnknownError('the write was sent and not confirmed', { cause: err })
}

// The SQLSTATE of a database error, or of the one a StoreUnavailableError wraps.
export function sqlState (err: unknown): string | undefined {
  const code = ((err instanceof StoreUnavailableError ? err.cause : err) as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

// Bounds work that writes nothing. The work itself goes on past the deadline, so the 503 it answers is true only
// for such work; a write is bounded by Db.writeBefore instead.
export async function withDeadline<T> (work: Promise<T>, ms: number, what: string): Promise<T> {
  if (!Number.isFinite(ms)) return await work
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`${what} took longer than ${ms} ms`)), ms)
  })
  return await Promise.race([work, expired]).finally(() => clearTimeout(timer))
}
