import pino, { type LoggerOptions } from 'pino'
import type { Config } from './config.js'

export type LogDestination = ReturnType<typeof pino.destination>

// On stdout in batches: a write(2) per line cost more than the line (bench/RESULTS.md). Each batch written at once, on
// the main thread: sonic-boom measures the chunk it is filling again on every line, and while an asynchronous write is
// in flight a whole turn's lines pile into the next chunk (16 KiB at 128 connections, and one write a turn falls
// behind); a synchronous write keeps the chunk under MIN_BATCH and cost the least (bench/log-lines.ts destinations).
// A reader of stdout that stops now stops the service, not its memory. The periodic flush shows a quiet service's
// lines at once.
const MIN_BATCH = 4096
const FLUSH_EVERY_MS = 100

export function logDestination (): LogDestination {
  const destination = pino.destination({ sync: true, minLength: MIN_BATCH, periodicFlush: FLUSH_EVERY_MS })
  // pino writes out what an asynchronous destination holds when the process exits, not a synchronous one's batch.
  process.once('exit', () => {
    try {
      destination.flushSync()
    } catch {} // stdout closed: nowhere left to write
  })
  return destination
}

// Once every line is written, or after boundMs (a reader of stdout that stopped): the way out is not held up.
export async function flushLog (destination: Pick<LogDestination, 'flush'>, boundMs = 2_000): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, boundMs)
    // Called back with an error too: fsync of a pipe fails (EINVAL) after the write.
    destination.flush(() => { clearTimeout(timer); resolve() })
  })
}

// docs/operations.md, "Logs". Fastify logs no headers; should a serializer ever, redaction removes the token.
// Fastify gives pino `stream`.
type ServiceLoggerOptions = LoggerOptions & { stream?: LogDestination }

export function loggerOptions (config: Pick<Config, 'logLevel' | 'production'>, destination?: LogDestination): ServiceLoggerOptions {
  const options: ServiceLoggerOptions = {
    level: config.logLevel,
    serializers: { err: serializeError },
    redact: {
      // err.params: PGlite's errors carry the statement's parameters, the client's plant data.
      paths: ['req.headers.authorization', 'headers.authorization', 'request.headers.authorization', 'err.params', 'err.cause.params'],
      censor: '[redacted]'
    }
  }
  // Pretty lines for a person at a terminal where the dev dependency is installed.
  if (!config.production && process.stdout.isTTY && hasPinoPretty()) {
    options.transport = { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } }
  } else if (destination !== undefined) {
    options.stream = destination
  }
  return options
}

function hasPinoPretty (): boolean {
  try {
    import.meta.resolve('pino-pretty')
    return true
  } catch {
    return false
  }
}

// A database error (itself or as a `cause`) keeps its SQLSTATE and what it names, never plant data it can quote (SECURITY.md).
const DATABASE_ERROR_FIELDS = ['code', 'severity', 'constraint', 'table', 'column', 'schema', 'dataType', 'routine'] as const

// SQLSTATE classes whose message can quote a value: 22 data exception, P0 raised by PL/pgSQL.
const MESSAGE_MAY_QUOTE_DATA = /^(22|P0)/

interface DatabaseErrorLike extends Error { code: string }

function isDatabaseError (err: unknown): err is DatabaseErrorLike {
  if (!(err instanceof Error)) return false
  const { code } = err as { code?: unknown }
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && ('severity' in err || 'detail' in err)
}

interface SerializedError { [key: string]: unknown, type: string, message: string, stack: string }

export function serializeError (err: Error): SerializedError {
  const out = pino.stdSerializers.err(err) as unknown as SerializedError
  const databaseErrors: DatabaseErrorLike[] = []
  for (let e: unknown = err, n = 0; e instanceof Error && n < 10; e = e.cause, n++) {
    if (isDatabaseError(e)) databaseErrors.push(e)
  }
  if (databaseErrors.length === 0) return out
  const quoting = databaseErrors.filter((e) => MESSAGE_MAY_QUOTE_DATA.test(e.code) && e.message !== '')
  const withhold = (text: string): string =>
    quoting.reduce((t, e) => t.replaceAll(e.message, `database error ${e.code} (message withheld: it may quote plant data)`), text)
  const safe: SerializedError = { type: out.type, message: withhold(String(out.message)), stack: withhold(String(out.stack)) }
  if (databaseErrors[0] === err) {
    const fields = err as unknown as Record<string, unknown>
    for (const field of DATABASE_ERROR_FIELDS) {
      if (fields[field] !== undefined) safe[field] = fields[field]
    }
  } else {
    // A wrapper (StoreUnavailableError): its own fields, and the SQLSTATE underneath.
    for (const [key, value] of Object.entries(out)) {
      if (!(key in safe) && key !== 'raw') safe[key] = value
    }
    safe.databaseCode = databaseErrors[0]?.code
  }
  return safe
}
