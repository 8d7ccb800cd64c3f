// What the store's failures tell a caller. Two differ in what they know:
// - StoreUnavailableError (503): nothing was stored. The write was never
//   sent, or the database refused it (the statement failed and its
//   transaction rolled back). "Try again later", not "this request is wrong".
// - OutcomeUnknownError (504): the write was sent and not confirmed before
//   the deadline (a commit waiting for a synchronous standby, a frozen
//   server, a lost reply). PostgreSQL does not cancel a commit, so it may
//   land later; replaying the same create tells (a repeated insert is a
//   replay).
export class StoreUnavailableError extends Error {
  readonly statusCode = 503
  constructor (message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'StoreUnavailableError'
  }
}

export class OutcomeUnknownError extends Error {
  readonly statusCode = 504
  constructor (message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'OutcomeUnknownError'
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
// 25006 (read_only_sql_transaction): behind an HA proxy, a standby or a
// primary being demoted: the database is unavailable (503), not the code
// at fault, and the pool drops that connection as after every failure.
// 57P04: the database was dropped under the connection; 57P05: the server
// ended an idle session.
export const DATABASE_MISSING = '3D000'
const READ_ONLY = '25006'
const unavailableStates = new Set([
  '57P01', '57P02', '57P03', '57P04', '57P05', '53300', '57014', '53000', '53100', '53200',
  DATABASE_MISSING, READ_ONLY
])

// The store itself was closed (shutdown): waiting will not bring it back.
const closedMessages = ['PGlite is closed', 'Cannot use a pool after calling end']

const unavailableMessages = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Client has encountered a connection error',
  'Connection ended',
  'connection timeout',
  ...closedMessages
]

// Unavailable: the database could not do what was asked. A write whose
// outcome is unknown is not (its caller must not say "nothing stored").
export function isUnavailable (err: unknown): boolean {
  if (err instanceof StoreUnavailableError) return true
  if (err instanceof OutcomeUnknownError) return false
  if (!(err instanceof Error)) return false
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string' && (networkCodes.has(code) || unavailableStates.has(code) || code.startsWith('08'))) return true
  return unavailableMessages.some((m) => err.message.includes(m))
}

// An unavailable database that may come back within a create's deadline (a
// failover, a restart, a cut network), so the same write is worth sending
// again: not a closed store, and not a deadline of the service's own (a
// StoreUnavailableError with no database error under it).
// A write whose outcome is unknown is worth sending again too: its repeat
// answers what the database holds.
export function isTransient (err: unknown): boolean {
  const unknown = err instanceof OutcomeUnknownError
  if (!(unknown || isUnavailable(err)) || !(err instanceof Error)) return false
  const cause = err instanceof StoreUnavailableError || unknown ? err.cause : err
  if (!(cause instanceof Error)) return false
  return !closedMessages.some((m) => cause.message.includes(m))
}

export function asStoreError (err: unknown): unknown {
  return isUnavailable(err) && !(err instanceof StoreUnavailableError)
    ? new StoreUnavailableError('The database is unavailable', { cause: err })
    : err
}

// How a write that was sent failed: a database error of severity ERROR
// (the statement failed; outside a transaction block nothing of it is
// committed) is the database's refusal, as asStoreError says. Anything else
// (no reply in time, a lost connection, a FATAL ending the session, which
// may come while a commit waits for a standby) may have come after the
// commit: unknown.
export function sentWriteError (err: unknown): unknown {
  const severity = (err as { severity?: unknown } | null)?.severity
  // pg refuses a statement on a connection it knows is broken, unsent.
  const notSent = err instanceof Error && err.message.includes('is not queryable')
  if (severity === 'ERROR' || notSent) return asStoreError(err)
  return new OutcomeUnknownError('the write was sent and not confirmed', { cause: err })
}

// The SQLSTATE of a database error, or of the one a StoreUnavailableError wraps.
export function sqlState (err: unknown): string | undefined {
  const code = ((err instanceof StoreUnavailableError ? err.cause : err) as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

// Bounds a read as a whole: the readiness check, and the SELECT that
// answers creates whose id was already stored. The work is not cancelled,
// so this is only for statements that write nothing: a 503 from here is
// true. A write is never raced against a timer (see Db.writeBefore).
export async function withDeadline<T> (work: Promise<T>, ms: number, what: string): Promise<T> {
  if (!Number.isFinite(ms)) return await work
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`${what} took longer than ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([work, expired])
  } finally {
    clearTimeout(timer)
  }
}
