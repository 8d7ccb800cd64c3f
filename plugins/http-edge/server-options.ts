import type { Server } from 'node:http'
import type { FastifyHttpOptions, FastifyServerOptions } from 'fastify'
import type { Config } from '../../src/config.js'
import { frameworkErrorHandler } from '../error-answers.js'
import { AccessLog } from '../logging/access-log.js'
import { clientErrorHandler } from './http-rules.js'
import { childLoggerWithTraceId, genReqId } from '../logging/request-ids.js'

// How long one client may hold a connection; a slow one is cut off with a
// 408 at most checkIntervalMs past its deadline.
export interface ServerTimeouts {
  // Headers (slowloris), then the whole request, must arrive within these.
  headersTimeoutMs: number
  requestTimeoutMs: number
  // Past the 60 s idle timeout of common load balancers, so they close first.
  keepAliveTimeoutMs: number
  // A connection with no traffic either way while a request is open closes
  // after this; it must exceed the longest a create can take (about
  // 4 x DB_TIMEOUT_MS + 1 s: docs/api.md).
  connectionTimeoutMs: number
  checkIntervalMs: number
}

export function serverTimeouts (config: Pick<Config, 'dbTimeoutMs'>, overrides: Partial<ServerTimeouts> = {}): ServerTimeouts {
  return {
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 65_000,
    connectionTimeoutMs: Math.max(60_000, 4 * config.dbTimeoutMs + 10_000),
    checkIntervalMs: 1_000,
    ...overrides
  }
}

// Node's default, stated: a header block larger than this gets 431.
export const MAX_HEADER_BYTES = 16 * 1024

export interface ServerOptionsOverrides {
  logger?: FastifyServerOptions['logger']
  // Tests shorten these to watch slow clients being cut off.
  timeouts?: Partial<ServerTimeouts>
}

// The Fastify options that must be fixed when the instance is created.
export function serverOptions (config: Config, { logger = false, timeouts }: ServerOptionsOverrides = {}): FastifyHttpOptions<Server> {
  const t = serverTimeouts(config, timeouts)
  return {
    logger,
    // One access line per answer, in place of Fastify's two request lines.
    logController: new AccessLog(),
    bodyLimit: config.bodyLimit,
    genReqId,
    requestIdHeader: false,
    // A caller's traceparent puts trace_id on every log line of its request.
    childLoggerFactory: childLoggerWithTraceId,
    // Malformed HTTP and errors raised before routing, in the Error shape.
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
    // Fastify sets these three on the server itself; the rest reach Node only
    // through the options it passes to http.createServer.
    requestTimeout: t.requestTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    connectionTimeout: t.connectionTimeoutMs,
    http: {
      headersTimeout: t.headersTimeoutMs,
      requestTimeout: t.requestTimeoutMs,
      keepAliveTimeout: t.keepAliveTimeoutMs,
      connectionsCheckingInterval: t.checkIntervalMs,
      maxHeaderSize: MAX_HEADER_BYTES,
      // Node's Host check answers with an empty body: requireHostHeader does it.
      requireHostHeader: false
    },
    // Opening embedded PGlite compiles WebAssembly and runs initdb: seconds, not ms.
    pluginTimeout: 60_000,
    // Fastify's own 503 during close has a body outside the contract:
    // refuseWhileClosing answers instead.
    return503OnClosing: false,
    forceCloseConnections: 'idle'
  }
}
