import Fastify, { type FastifyHttpOptions, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { Server } from 'node:http'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from './config.js'
import { frameworkErrorHandler } from '../plugins/http-edge/error-answers.js'
import { clientErrorHandler } from '../plugins/http-edge/edge-checks.js'
import { genReqId } from '../plugins/http-edge/request-id.js'
import { connectionLimits, serverTimeouts, type ServerTimeouts } from '../plugins/http-edge/timeouts.js'
import { childLoggerWithTraceId } from '../plugins/telemetry/trace-id.js'
import rateLimitPlugin from '../plugins/rate-limit.js'
import httpEdge from '../plugins/http-edge/index.js'
import jsonBody from '../plugins/json-body/index.js'
import dbPlugin, { type DbPluginOptions } from '../plugins/db.js'
import authPlugin from '../plugins/auth.js'
import docsPlugin from '../plugins/docs.js'
import plantsRoutes from '../routes/plants.js'
import healthRoutes, { isProbeRoute } from '../routes/health.js'
import { AccessLog } from '../plugins/http-edge/access-log.js'

export interface AppOptions {
  config: Config
  logger?: FastifyServerOptions['logger']
  // See DbPluginOptions.background: set by the server for PostgreSQL.
  background?: DbPluginOptions['background']
  // Tests shorten these to watch slow clients being cut off.
  timeouts?: Partial<ServerTimeouts>
  // See DbPluginOptions.writer: tests shrink the write queue.
  writer?: DbPluginOptions['writer']
}

// Server options that must be fixed when the instance is created.
export function serverOptions (
  config: Config,
  logger: FastifyServerOptions['logger'],
  timeouts: ServerTimeouts = serverTimeouts(config)
): FastifyHttpOptions<Server> {
  const limits = connectionLimits(timeouts)
  return {
    logger,
    // One access line per answer, in place of Fastify's two request lines.
    logController: new AccessLog(isProbeRoute),
    bodyLimit: config.bodyLimit,
    genReqId,
    requestIdHeader: false,
    // A caller's traceparent puts trace_id on every log line of its request.
    childLoggerFactory: childLoggerWithTraceId,
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
    // Bound slow and oversized clients: see plugins/http-edge/timeouts.ts.
    ...limits,
    // Node's Host check answers with an empty body: requireHostHeader does it.
    http: { ...limits.http, requireHostHeader: false },
    // Opening embedded PGlite compiles WebAssembly and runs initdb: seconds, not ms.
    pluginTimeout: 60_000,
    // Fastify's own 503 during close has a body outside the contract:
    // refuseWhileClosing answers instead.
    return503OnClosing: false,
    forceCloseConnections: 'idle'
  }
}

// The whole service, built the same way for the server and for tests.
export async function buildApp ({ config, logger = false, background, timeouts, writer }: AppOptions): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(config, logger, serverTimeouts(config, timeouts))).withTypeProvider<TypeBoxTypeProvider>()

  // Registered in the order a request meets them: README, "A request's path".
  // Operating it, when configured: spans (first, so the request span covers
  // every hook) and metrics (every answer timed, 404s included). Imported
  // only then: the OpenTelemetry SDK and prom-client hold resident memory
  // that a service without them should not carry (bench/RESULTS.md).
  if (config.tracing !== undefined) {
    await app.register((await import('../plugins/telemetry/tracing-plugin.js')).default, { tracing: config.tracing })
  }
  if (config.metricsPort !== undefined) {
    await app.register((await import('../plugins/telemetry/metrics-plugin.js')).default, { port: config.metricsPort, host: config.host })
  }

  // The edge's hooks first, so they run before every route's; the database
  // before the routes that use it.
  await app.register(httpEdge)
  await app.register(jsonBody)
  await app.register(dbPlugin, {
    config,
    ...(background === undefined ? {} : { background }),
    ...(writer === undefined ? {} : { writer })
  })
  // Before the routes, so swagger sees them added; outside the API context,
  // so the docs are public.
  await app.register(docsPlugin)
  await app.register(healthRoutes)
  // The API routes and the bearer hook share one encapsulated context, so
  // auth guards exactly them; the rate limit counts authenticated creates.
  await app.register(async (api) => {
    await api.register(authPlugin, { tokens: config.apiTokens })
    if (config.rateLimitPerMinute !== undefined) await api.register(rateLimitPlugin, { perMinute: config.rateLimitPerMinute })
    await api.register(plantsRoutes)
  })
  return app
}
