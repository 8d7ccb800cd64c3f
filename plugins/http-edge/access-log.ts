import { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import pino from 'pino'
import type { CreateOutcome } from '../../src/store/plant-store.js'
import { bindingsJson, RequestLogger } from '../../src/logger.js'
import { TRACE_ID_FIELD } from '../telemetry/trace-id.js'

// The access log: one line per answer Fastify gives, written when the answer
// has been sent, with what an operator searches by and nothing a caller
// sent as data (no body, no headers, no token). The request's own logger
// adds reqId and, when the caller sent a traceparent, trace_id. Errors keep
// their own lines (error-answers.ts) besides this one. Answers given
// outside Fastify (malformed HTTP, an unmet Expect: edge-checks.ts) write
// a line of the same shape there.

export const ACCESS_LINE = 'request'

type Outcome = CreateOutcome['kind']

declare module 'fastify' {
  interface FastifyRequest {
    // A create's outcome, for its access line (noteOutcome).
    createOutcome: Outcome | null
  }
}

// Declared on every request, so each has it from the start (a property
// added later would change the request's shape, and slow every request).
export function declareOutcome (fastify: FastifyInstance): void {
  fastify.decorateRequest('createOutcome', null)
}

// A create's outcome, noted by the route for its access line.
export function noteOutcome (request: FastifyRequest, outcome: Outcome): void {
  request.createOutcome = outcome
}

// The fields of an access line for an answer given outside Fastify.
export function edgeAccessFields (reqId: string, status: number, method?: string): Record<string, unknown> {
  return method === undefined ? { reqId, status } : { reqId, method, route: null, status }
}

type Levelled = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean }

interface AccessFields {
  method: string
  route: string | null
  status: number
  durationMs: number
  outcome?: Outcome
}

// Fastify's request lines ("incoming request", "request completed") replaced
// by the one access line. Requests to `quiet` routes (health probes, asked
// every few seconds by every engine and balancer) log it at debug.
export class AccessLog extends LogController {
  readonly #quiet: (route: string | undefined) => boolean

  constructor (quiet: (route: string | undefined) => boolean) {
    super()
    this.#quiet = quiet
  }

  override incomingRequest (): void {}

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const log = request.log as Levelled
    const enabled = (level: string): boolean => log.isLevelEnabled === undefined || log.isLevelEnabled(level)
    // Nothing is built for a line that would be dropped (LOG_LEVEL=warn):
    // debug is below info.
    if (error == null && !enabled('info')) return
    // routeOptions builds an object on every read: read once.
    const route = request.routeOptions.url
    const level = error != null ? 'error' : this.#quiet(route) ? 'debug' : 'info'
    if (!enabled(level)) return
    const fields: AccessFields = {
      method: request.method,
      route: route ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100
    }
    if (request.createOutcome !== null) fields.outcome = request.createOutcome
    if (error == null && level === 'info' && writeInfoLine(log, fields)) return
    log[level](error == null ? fields : { ...fields, err: error }, ACCESS_LINE)
  }
}

// The access line at info, the one line nearly every request writes,
// formatted here from pino's own pieces (the level, the time, the bindings
// with reqId and trace_id, the end of line) and written to pino's stream:
// the same bytes pino writes, in a fraction of the time pino's general
// formatter takes for them (bench/RESULTS.md). Used only for loggers whose
// formatting was checked to give exactly pino's line (sameAsPino), and with
// no mixin or message prefix, which can add to a line for some loggers or
// calls and not others; false when the line is left to pino.
const { chindingsSym, endSym, lsCacheSym, mixinSym, needsMetadataGsym, streamSym, timeSym } = pino.symbols
// In pino's symbols, not in its types.
const msgPrefixSym = (pino.symbols as unknown as Record<string, symbol>).msgPrefixSym as symbol
const INFO = 30

// pino's pieces, read through its exported symbols.
type PinoInternals = Record<symbol, unknown>
interface LineStream { write: (line: string) => unknown, [needsMetadataGsym]?: boolean }

function writeInfoLine (log: FastifyBaseLogger, fields: AccessFields): boolean {
  // A request logger that made no child of pino's (src/logger.ts): its
  // parent's pieces and its own bindings, as the child would have them.
  let bindings = ''
  if (log instanceof RequestLogger) {
    if (log.made === undefined) {
      bindings = bindingsJson(log.bindings)
      log = log.parent
    } else {
      log = log.made
    }
  }
  const p = log as unknown as PinoInternals
  const stream = p[streamSym] as LineStream | undefined
  if (stream === undefined || p[mixinSym] !== undefined || p[msgPrefixSym] !== undefined || !sameAsPino(log, stream)) return false
  stream.write(formatInfoLine(p, (p[chindingsSym] as string) + bindings, fields))
  return true
}

function formatInfoLine (p: PinoInternals, chindings: string, { method, route, status, durationMs, outcome }: AccessFields): string {
  const level = (p[lsCacheSym] as Record<number, string>)[INFO] as string
  const time = (p[timeSym] as () => string)()
  return `${level}${time}${chindings},"method":${json(method)},"route":${route === null ? 'null' : json(route)},` +
    `"status":${status},"durationMs":${durationMs}${outcome === undefined ? '' : `,"outcome":"${outcome}"`},"msg":"${ACCESS_LINE}"${p[endSym] as string}`
}

// Methods and route patterns are few: each is escaped once.
const jsonStrings = new Map<string, string>()
function json (text: string): string {
  let quoted = jsonStrings.get(text)
  if (quoted === undefined) {
    quoted = JSON.stringify(text)
    if (jsonStrings.size < 100) jsonStrings.set(text, quoted)
  }
  return quoted
}

// Whether formatInfoLine gives, for loggers writing to this stream, the line
// pino itself would (options such as formatters, a mixin, a message prefix
// or serializers change pino's line): checked once per stream, by formatting
// one line both ways with the same time, from the logger and from a child of
// it as the request logger's bindings make one.
const checkedStreams = new WeakMap<LineStream, boolean>()
function sameAsPino (log: FastifyBaseLogger, stream: LineStream): boolean {
  let same = checkedStreams.get(stream)
  if (same === undefined) {
    // A stream that asks for each line's metadata (pino.multistream) gets
    // it only from pino.
    same = stream[needsMetadataGsym] !== true && formatsLikePino(log)
    checkedStreams.set(stream, same)
  }
  return same
}

function formatsLikePino (log: FastifyBaseLogger): boolean {
  const sample: AccessFields = { method: 'POST', route: '/plants', status: 200, durationMs: 1.25, outcome: 'created' }
  const sampleBindings = { reqId: 'sample-1', [TRACE_ID_FIELD]: '4bf92f3577b34da6a3ce929d0e4736aa' }
  const lines: string[] = []
  const probe = Object.create(log, {
    [streamSym]: { value: { write: (line: string) => lines.push(line) } },
    [timeSym]: { value: () => ',"time":0' }
  }) as FastifyBaseLogger
  try {
    probe.info({ ...sample }, ACCESS_LINE)
    probe.child(sampleBindings).info({ ...sample }, ACCESS_LINE)
  } catch {
    return false
  }
  const chindings = (probe as unknown as PinoInternals)[chindingsSym] as string
  return lines.length === 2 &&
    lines[0] === formatInfoLine(probe as unknown as PinoInternals, chindings, sample) &&
    lines[1] === formatInfoLine(probe as unknown as PinoInternals, chindings + bindingsJson(sampleBindings), sample)
}
