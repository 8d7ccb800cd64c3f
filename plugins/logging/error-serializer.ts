import pino from 'pino'

// What an error may put in the log. A database error can carry the row it
// refused (`detail`: "Failing row contains (…)"), the statement's
// parameters, a context or hint built from the row, and, for a data error
// or an exception raised by a trigger, a message that quotes a value. An
// operator needs the SQLSTATE, the constraint and the table or column, not
// the plant: those are kept, the rest is left out, for the error itself and
// for a database error it wraps (`cause`).

// The fields of a PostgreSQL error (pg and PGlite alike) that name things
// rather than quote data.
const DATABASE_ERROR_FIELDS = ['code', 'severity', 'constraint', 'table', 'column', 'schema', 'dataType', 'routine'] as const

// SQLSTATE classes whose message can quote a value: 22 data exception
// ('invalid input syntax for type bigint: "…"'), P0 raised by PL/pgSQL.
const MESSAGE_MAY_QUOTE_DATA = /^(22|P0)/

interface DatabaseErrorLike extends Error { code: string }

function isDatabaseError (err: unknown): err is DatabaseErrorLike {
  if (!(err instanceof Error)) return false
  const { code } = err as { code?: unknown }
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && ('severity' in err || 'detail' in err)
}

function causes (err: Error): Error[] {
  const chain: Error[] = []
  for (let e: unknown = err; e instanceof Error && chain.length < 10; e = e.cause) chain.push(e)
  return chain
}

export interface SerializedError { [key: string]: unknown, type: string, message: string, stack: string }

export function serializeError (err: Error): SerializedError {
  const out = pino.stdSerializers.err(err) as unknown as SerializedError
  if (!(err instanceof Error)) return out
  const databaseErrors = causes(err).filter(isDatabaseError)
  if (databaseErrors.length === 0) return out
  let message = String(out.message)
  let stack = String(out.stack)
  for (const e of databaseErrors) {
    if (MESSAGE_MAY_QUOTE_DATA.test(e.code) && e.message !== '') {
      const withheld = `database error ${e.code} (message withheld: it may quote plant data)`
      message = message.replaceAll(e.message, withheld)
      stack = stack.replaceAll(e.message, withheld)
    }
  }
  const safe: SerializedError = { type: out.type, message, stack }
  if (isDatabaseError(err)) {
    for (const field of DATABASE_ERROR_FIELDS) {
      const value = (err as unknown as Record<string, unknown>)[field]
      if (value !== undefined) safe[field] = value
    }
  } else {
    // A wrapper (StoreUnavailableError): its own fields, and the SQLSTATE
    // of the database error underneath.
    for (const [key, value] of Object.entries(out)) {
      if (!(key in safe) && key !== 'raw') safe[key] = value
    }
    safe.databaseCode = databaseErrors[0]?.code
  }
  return safe
}
