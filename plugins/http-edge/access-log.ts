import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify'
import type { CreateOutcome } from '../../src/store/plant-store.js'

// The access log: one line per answer Fastify gives, written when the answer
// has been sent, with what an operator searches by and nothing a caller
// sent as data (no body, no headers, no token). The request's own logger
// adds reqId and, when the caller sent a traceparent, trace_id. Errors keep
// their own lines (error-answers.ts) besides this one. Answers given
// outside Fastify (malformed HTTP, an unmet Expect: edge-checks.ts) write
// a line of the same shape there.

export const ACCESS_LINE = 'request'

type Outcome = CreateOutcome['kind']

// A create's outcome, noted by the route for its access line.
const outcomes = new WeakMap<FastifyRequest, Outcome>()
export function noteOutcome (request: FastifyRequest, outcome: Outcome): void {
  outcomes.set(request, outcome)
}

// The fields of an access line for an answer given outside Fastify.
export function edgeAccessFields (reqId: string, status: number, method?: string): Record<string, unknown> {
  return method === undefined ? { reqId, status } : { reqId, method, route: null, status }
}

type Levelled = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean }

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
    const line: Record<string, unknown> = {
      method: request.method,
      route: route ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100
    }
    const outcome = outcomes.get(request)
    if (outcome !== undefined) line.outcome = outcome
    if (error != null) line.err = error
    log[level](line, ACCESS_LINE)
  }
}
