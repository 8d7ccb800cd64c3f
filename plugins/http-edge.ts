import fp from 'fastify-plugin'
import type { IncomingMessage, Server } from 'node:http'
import type { FastifyError, FastifyHttpOptions, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Config } from '../src/config.js'
import { HttpError, RETRY_AFTER_SECONDS, retryAfter } from '../src/http-error.js'
import { notFound, pathOf } from './error-answers.js'

// The edge every HTTP service wants: timeouts and size limits, requests whose framing the service cannot read
// refused, 404 and 405 before a body is read, and new requests refused while the service shuts down. The
// connection rules this contract adds on top (pipelining, the lingering close, raw answers) are in
// plugins/connection-rules.ts (docs/architecture.md, "The connection rules").

// Headers (slowloris), then the whole request, must arrive in time. Keep-alive
// outlasts common load balancers' 60 s, so they close first. A connection
// silent while a request is open waits longer than a create can take (docs/api.md).
const TIMEOUTS = { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 65_000, checkIntervalMs: 1_000 }
export type ServerTimeouts = typeof TIMEOUTS & { connectionTimeoutMs: number }

export function serverTimeouts (config: Pick<Config, 'dbTimeoutMs'>, overrides: Partial<ServerTimeouts> = {}): ServerTimeouts {
  return { ...TIMEOUTS, connectionTimeoutMs: Math.max(60_000, 4 * config.dbTimeoutMs + 10_000), ...overrides }
}

// Node's default, stated: a larger header block gets 431.
export const MAX_HEADER_BYTES = 16 * 1024

export function edgeOptions (config: Config, timeouts?: Partial<ServerTimeouts>): FastifyHttpOptions<Server> {
  const t = serverTimeouts(config, timeouts)
  return {
    bodyLimit: config.bodyLimit,
    // Fastify sets these three on the server it creates with `http`.
    requestTimeout: t.requestTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    connectionTimeout: t.connectionTimeoutMs,
    http: {
      headersTimeout: t.headersTimeoutMs,
      connectionsCheckingInterval: t.checkIntervalMs,
      maxHeaderSize: MAX_HEADER_BYTES,
      // Node's own Host check answers with an empty body: framingError answers in the Error shape instead.
      requireHostHeader: false
    },
    // Opening embedded PGlite compiles WebAssembly and runs initdb, which takes seconds.
    pluginTimeout: 60_000,
    // Fastify's own 503 during close has a body outside the contract, so the edge answers instead.
    return503OnClosing: false,
    forceCloseConnections: 'idle'
  }
}

const CLOSE = { connection: 'close' }

// A request the service cannot read as the client meant it, refused before anything else (RFC 9112 3.2 and 6.1,
// RFC 9110 5.3 and 6.2). Node decodes chunked only, so a coding in front of it would reach the JSON reader undecoded.
function framingError (req: IncomingMessage): HttpError | undefined {
  if (req.httpVersionMajor !== 1 || req.httpVersionMinor > 1) {
    return new HttpError(505, `HTTP/${req.httpVersion.slice(0, 10)} is not supported: send HTTP/1.1`, CLOSE)
  }
  const twice = repeatedSingleton(req.rawHeaders)
  if (twice !== undefined) return new HttpError(400, `The request has more than one ${twice} header`, CLOSE)
  const host = req.headers.host
  if (host === undefined ? req.httpVersionMinor === 1 : !VALID_HOST.test(host)) {
    return new HttpError(400, host === undefined ? 'An HTTP/1.1 request needs a Host header' : 'The Host header is not a valid host[:port]', CLOSE)
  }
  const coding = req.headers['transfer-encoding']
  if (coding !== undefined && !/^[ \t]*chunked[ \t]*$/i.test(coding)) {
    return new HttpError(501, `Transfer-Encoding ${coding.slice(0, 100)} is not implemented: send the body as it is, or chunked`, CLOSE)
  }
  return undefined
}

// Host and Authorization may appear once (RFC 9110 5.3). Node keeps the first of two, while a proxy in front may
// have read the last: the service would then answer for, or authenticate, a request other than the one it was sent.
function repeatedSingleton (rawHeaders: string[]): string | undefined {
  let hosts = 0
  let authorizations = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++
    else if (name.length === 13 && name.toLowerCase() === 'authorization') authorizations++
  }
  return hosts > 1 ? 'Host' : authorizations > 1 ? 'Authorization' : undefined
}

// uri-host [ ":" port ]: an IP literal, or a reg-name of unreserved characters, sub-delims and %-escapes.
const VALID_HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]*)(?::[0-9]*)?$/

// A request no route takes is answered here, before auth and before its body is read (Fastify's own 404 route
// would parse the body first): 405 with Allow on a path an operation serves, else 404. A route with an
// operationId makes its path an API path; a path with parameters or a wildcard is left out.
function routingRule (fastify: FastifyInstance): (request: FastifyRequest) => HttpError | undefined {
  const methodsByPath = new Map<string, string[]>()
  fastify.addHook('onRoute', (route) => {
    const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId
    if (operationId === undefined || /[:*]/.test(route.url)) return
    const methods = [...(methodsByPath.get(route.url) ?? []), ...[route.method].flat()]
    methodsByPath.set(route.url, methods.sort())
  })
  return (request) => {
    if (!request.is404) return undefined
    const path = pathOf(request.url)
    let decoded = path
    try {
      decoded = decodeURIComponent(path)
    } catch {}
    const allowed = methodsByPath.get(decoded)
    if (allowed === undefined) return notFound(request)
    return new HttpError(405, `Method ${request.method.slice(0, 20)} is not allowed on ${path.slice(0, 100)}; use ${allowed.join(' or ')}`,
      { allow: allowed.join(', ') })
  }
}

async function httpEdge (fastify: FastifyInstance): Promise<void> {
  const unrouted = routingRule(fastify)
  // Once close has begun, a request on a kept-alive connection is refused, so that the drain ends.
  let closing = false
  fastify.addHook('preClose', async () => { closing = true })
  fastify.addHook('onRequest', function edge (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) {
    reply.header('x-request-id', request.id).header('x-content-type-options', 'nosniff')
    const refused = framingError(request.raw) ?? unrouted(request) ??
      (closing ? new HttpError(503, 'The service is shutting down; retry later', { ...CLOSE, ...retryAfter(RETRY_AFTER_SECONDS.shuttingDown) }) : undefined)
    done(refused as FastifyError | undefined)
  })
}

export default fp(httpEdge, { name: 'http-edge', fastify: '5.x', dependencies: ['error-answers'] })
