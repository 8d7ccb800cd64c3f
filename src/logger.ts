import { createRequire } from 'node:module'
import type { FastifyServerOptions } from 'fastify'
import pino from 'pino'
import type { Config } from './config.js'
import { serializeError } from './error-log.js'

// pino JSON lines, each with the request id (Fastify's reqId). The token
// never reaches a log line: Fastify does not log headers, and should a
// serializer ever include them, redaction removes it.
export function loggerOptions (config: Pick<Config, 'logLevel' | 'production'>): FastifyServerOptions['logger'] {
  const options: Exclude<FastifyServerOptions['logger'], boolean | undefined> = {
    level: config.logLevel,
    // Database errors without the plant data they can carry: src/error-log.ts.
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
  } else {
    // Written before the call returns. pino's default stdout stream writes in
    // the background, and a line still being written when the process exits
    // (the "stopped" line, a fatal start-up line) is lost: its exit-time
    // flush skips a write in flight, and flush(cb) does not wait for it.
    options.stream = pino.destination({ dest: 1, sync: true })
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
