import { createRequire } from 'node:module'
import type { FastifyServerOptions } from 'fastify'
import pino from 'pino'
import type { Config } from './config.js'
import { serializeError } from './loggable-error.js'

// The service's log destination: stdout, written asynchronously so a
// request never waits on a write. A line is written as soon as no write is
// in flight, and lines that arrive while one is gather into the next write
// (many lines a write under load, no delay when quiet). minLength 1 rather
// than 0 only so that flush(cb) waits for the write in flight (with 0 it
// calls back at once); every line is longer. flushLog waits for what is
// buffered and in flight, on shutdown and before a fatal exit; pino's own
// exit hook writes the buffer but skips a write still in flight.
export const LOG_MIN_LENGTH = 1

export type LogDestination = ReturnType<typeof pino.destination>

export function logDestination (): LogDestination {
  return pino.destination({ dest: 1, sync: false, minLength: LOG_MIN_LENGTH })
}

// Resolves once every line given to `destination` has been written, or
// after boundMs (stdout blocked by a reader that stopped): an exit is never
// held up for long.
export async function flushLog (destination: LogDestination, boundMs = 2_000): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, boundMs)
    try {
      // fsync of a pipe fails (EINVAL) after the write: the lines are out.
      destination.flush(() => { clearTimeout(timer); resolve() })
    } catch {
      clearTimeout(timer)
      resolve()
    }
  })
}

// pino JSON lines, each with the request id (Fastify's reqId). The token
// never reaches a log line: Fastify does not log headers, and should a
// serializer ever include them, redaction removes it.
export function loggerOptions (config: Pick<Config, 'logLevel' | 'production'>, destination?: LogDestination): FastifyServerOptions['logger'] {
  const options: Exclude<FastifyServerOptions['logger'], boolean | undefined> = {
    level: config.logLevel,
    // Database errors without the plant data they can carry: src/loggable-error.ts.
    serializers: { err: serializeError },
    redact: {
      // Database errors from PGlite carry the statement's parameters: the
      // client's plant data stays out of the log like the request body.
      paths: ['req.headers.authorization', 'headers.authorization', 'request.headers.authorization', 'err.params', 'err.cause.params'],
      censor: '[redacted]'
    }
  }
  // Pretty lines only for a person at a terminal, and only where the dev
  // dependency is installed; containers and log shippers get JSON.
  if (!config.production && process.stdout.isTTY && hasPinoPretty()) {
    options.transport = { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } }
  } else if (destination !== undefined) {
    options.stream = destination
  }
  return options
}

function hasPinoPretty (): boolean {
  try {
    createRequire(import.meta.url).resolve('pino-pretty')
    return true
  } catch {
    return false
  }
}
