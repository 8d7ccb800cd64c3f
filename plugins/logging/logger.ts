import type { FastifyServerOptions } from 'fastify'
import pino from 'pino'
import type { Config } from '../../src/config.js'
import { serializeError } from './error-serializer.js'

export type LogDestination = ReturnType<typeof pino.destination>

// stdout, written asynchronously so a request never waits on a write. minLength 1
// still writes each line once no write is in flight, and makes flush(cb) wait for
// the lines handed over (sonic-boom's flush does nothing when minLength is 0).
export function logDestination (): LogDestination {
  return pino.destination({ dest: 1, sync: false, minLength: 1 })
}

// Resolves once every line given to `destination` has been written, or after
// boundMs (a reader of stdout that stopped), so the way out of the process is not held up.
export async function flushLog (destination: Pick<LogDestination, 'flush'>, boundMs = 2_000): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, boundMs)
    // Called back with an error too: fsync of a pipe fails (EINVAL) after
    // the write, and the lines are out.
    destination.flush(() => { clearTimeout(timer); resolve() })
  })
}

// pino JSON lines (docs/operations.md, "Logs"). Fastify does not log headers;
// should a serializer ever include them, redaction removes the token.
export function loggerOptions (config: Pick<Config, 'logLevel' | 'production'>, destination?: LogDestination): FastifyServerOptions['logger'] {
  const options: Exclude<FastifyServerOptions['logger'], boolean | undefined> = {
    level: config.logLevel,
    serializers: { err: serializeError },
    redact: {
      // err.params: PGlite's errors carry the statement's parameters, the client's plant data.
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
    import.meta.resolve('pino-pretty')
    return true
  } catch {
    return false
  }
}
