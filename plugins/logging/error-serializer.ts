import pino from 'pino'

// A database error in the log (itself or as a `cause`) keeps what an operator
// needs, the SQLSTATE and what it names, and never the plant data it can quote
// (`detail`'s row, parameters, hint, a value in its message): SECURITY.md, "What is logged".

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

function causes (err: unknown): unknown[] {
  const chain: unknown[] = []
  for (let e = err; e instanceof Error && chain.length < 10; e = e.cause) chain.push(e)
  return chain
}

export interface SerializedError { [key: string]: unknown, type: string, message: string, stack: string }

export function serializeError (err: Error): SerializedError {
  const out = pino.stdSerializers.err(err) as unknown as SerializedError
  const databaseErrors = causes(err).filter(isDatabaseError)
  if (databaseErrors.length === 0) return out
  const quoting = databaseErrors.filter((e) => MESSAGE_MAY_QUOTE_DATA.test(e.code) && e.message !== '')
  const withhold = (text: string): string =>
    quoting.reduce((t, e) => t.replaceAll(e.message, `database error ${e.code} (message withheld: it may quote plant data)`), text)
  const safe: SerializedError = { type: out.type, message: withhold(String(out.message)), stack: withhold(String(out.stack)) }
  if (isDatabaseError(err)) {
    const fields = err as unknown as Record<string, unknown>
    for (const field of DATABASE_ERROR_FIELDS) {
      if (fields[field] !== undefined) safe[field] = fields[field]
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
