import { createRequire } from 'node:module'
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify'
import pino, { type Bindings, type ChildLoggerOptions, type LogFn } from 'pino'
import type { Config } from './config.js'
import { serializeError } from './loggable-error.js'

// The service's log destination: stdout, written asynchronously so a
// request never waits on a write: LogDestination gathers the lines and
// hands them to pino's asynchronous destination (sonic-boom), which writes
// as soon as no write is in flight. minLength 1 rather than 0 only so that
// flush(cb) waits for the write in flight (with 0 it calls back at once);
// every line is longer.
export const LOG_MIN_LENGTH = 1

type SonicBoom = ReturnType<typeof pino.destination>

// A line is handed to sonic-boom at once (in a timer's next turn) when
// nothing was handed over in the last GATHER_MS; otherwise it waits, with
// the lines that follow it, until GATHER_MS after that hand-over (or until
// GATHER_CHARS of them), and all go in one write. A quiet service writes
// each line as it comes; a busy one writes once per GATHER_MS, not line by
// line: sonic-boom's write measures the byte length of all it holds each
// time, so every line paid for all the lines before it, and each of its
// writes to stdout is a trip through libuv's thread pool, whose wake-ups
// cost the event loop more than the bytes (bench/RESULTS.md). flush hands
// over first, so flushLog waits for every line; flushSync writes them
// before it returns, for an exit.
export const GATHER_MS = 10
const GATHER_CHARS = 64 * 1024
// At exit a full pipe (a reader that stopped) is retried this long, then
// the lines are given up: an exit is never held up for long.
const EXIT_WRITE_BOUND_MS = 2_000
// One sonic-boom write may hold what was gathered (its default is 16 KiB).
const MAX_WRITE_BYTES = 1024 * 1024

export class LogDestination {
  // A way out that skipped flushLog (a bare process.exit) still writes the
  // gathered lines: pino's own exit hook knows only sonic-boom's. One
  // listener for every destination.
  static readonly #open = new Set<LogDestination>()
  static #flushAllOnExit (): void {
    for (const destination of LogDestination.#open) {
      try {
        destination.flushSync()
      } catch {}
    }
  }

  readonly #sonic: SonicBoom
  #lines = ''
  #timer: NodeJS.Timeout | undefined
  #handedOverAt = -Infinity

  constructor (sonic: SonicBoom) {
    this.#sonic = sonic
    if (LogDestination.#open.size === 0) process.once('exit', LogDestination.#flushAllOnExit)
    LogDestination.#open.add(this)
  }

  write (line: string): boolean {
    this.#lines += line
    if (this.#lines.length >= GATHER_CHARS) this.#handOver()
    else this.#timer ??= setTimeout(this.#handOver, Math.max(0, this.#handedOverAt + GATHER_MS - performance.now()))
    return true
  }

  flush (cb: (err?: Error) => void): void {
    this.#handOver()
    this.#sonic.flush(cb)
  }

  // What sonic-boom holds goes first, then the gathered lines, through a
  // synchronous sonic-boom on the same descriptor: handing them to the
  // asynchronous one would only start a write that an exit may cut short.
  flushSync (): void {
    this.#stopTimer()
    this.#sonic.flushSync()
    if (this.#lines === '') return
    const lines = this.#lines
    this.#lines = ''
    const giveUpAt = Date.now() + EXIT_WRITE_BOUND_MS
    // sonic-boom's descriptor is public at run time, not in its types.
    const { fd } = this.#sonic as unknown as { fd: number }
    pino.destination({ dest: fd, sync: true, retryEAGAIN: () => Date.now() < giveUpAt }).write(lines)
  }

  #stopTimer (): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
  }

  readonly #handOver = (): void => {
    this.#stopTimer()
    if (this.#lines === '') return
    const lines = this.#lines
    this.#lines = ''
    this.#handedOverAt = performance.now()
    this.#sonic.write(lines)
  }
}

export function logDestination (): LogDestination {
  return new LogDestination(pino.destination({ dest: 1, sync: false, minLength: LOG_MIN_LENGTH, maxWrite: MAX_WRITE_BYTES }))
}

// Resolves once every line given to `destination` has been written, or
// after boundMs (stdout blocked by a reader that stopped): an exit is never
// held up for long.
export async function flushLog (destination: Pick<LogDestination, 'flush'>, boundMs = 2_000): Promise<void> {
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

// The request's logger, as Fastify's childLoggerFactory gives it to every
// request: pino's child is made only when the request logs a line of its
// own (a rejection, an error) or asks for a child. Most requests log only
// their access line, which access-log.ts writes from the parent's pieces
// and bindingsJson, so they never pay for a child's bindings being
// serialized (bench/RESULTS.md). Made only for children without options of
// their own (a route's log level or serializers): the factory makes pino's
// child at once for those.
export class RequestLogger implements FastifyBaseLogger {
  #made: FastifyBaseLogger | undefined

  constructor (readonly parent: FastifyBaseLogger, readonly bindings: Bindings) {}

  // pino's child, once something needed it.
  get made (): FastifyBaseLogger | undefined {
    return this.#made
  }

  get #log (): FastifyBaseLogger {
    this.#made ??= this.parent.child(this.bindings)
    return this.#made
  }

  get level (): string {
    return (this.#made ?? this.parent).level
  }

  set level (level: string) {
    this.#log.level = level
  }

  // A logger without levels (Fastify's own when logging is off) logs at all.
  isLevelEnabled (level: string): boolean {
    const log = (this.#made ?? this.parent) as FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean }
    return log.isLevelEnabled === undefined || log.isLevelEnabled(level)
  }

  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#log.child(bindings, options)
  }

  // Declared here, defined on the prototype below: each forwards to pino's
  // child, made on the first call.
  declare fatal: LogFn
  declare error: LogFn
  declare warn: LogFn
  declare info: LogFn
  declare debug: LogFn
  declare trace: LogFn
  declare silent: LogFn

  static {
    for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const) {
      RequestLogger.prototype[level] = function (this: RequestLogger, ...args: unknown[]) {
        (this.#log[level] as (...args: unknown[]) => void)(...args)
      } as LogFn
    }
  }
}

// Bindings as pino appends them to its parent's in a child's lines:
// `,"key":value` for each one that is defined.
export function bindingsJson (bindings: Bindings): string {
  let json = ''
  for (const key in bindings) {
    const value = JSON.stringify(bindings[key])
    if (value !== undefined) json += `,"${key}":${value}`
  }
  return json
}
