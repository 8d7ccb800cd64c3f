import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from './config.js'
import { serverOptions, type ServerTimeouts } from '../plugins/http-edge/server-options.js'
import rateLimitPlugin from '../plugins/rate-limit.js'
import httpEdge from '../plugins/http-edge/index.js'
import jsonBody from '../plugins/json-body/index.js'
import dbPlugin, { type DbPluginOptions } from '../plugins/db.js'
import authPlugin, { staticCallerCount } from '../plugins/auth.js'
import { AccessTokens } from './jwt-verification.js'
import docsPlugin from '../plugins/docs.js'
import loadShedding from '../plugins/load-shedding.js'
import resourceMetadata from '../plugins/resource-metadata.js'
import plantsRoutes from '../routes/plants.js'
import healthRoutes from '../routes/health.js'

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

// The whole service, built the same way for the server and for tests.
export async function buildApp ({ config, logger = false, background, timeouts, writer }: AppOptions): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(config, { logger, timeouts })).withTypeProvider<TypeBoxTypeProvider>()

  // In the order a request meets them (docs/architecture.md, "A request's path").
  // Spans first, so the request span covers every hook. Telemetry is imported
  // only when configured: its SDKs hold memory a service without it should not carry.
  if (config.tracing !== undefined) {
    await app.register((await import('../plugins/telemetry/tracing-plugin.js')).default, { tracing: config.tracing })
  }
  if (config.metricsPort !== undefined) {
    await app.register((await import('../plugins/telemetry/metrics-plugin.js')).default, { port: config.metricsPort, host: config.host })
  }

  // The edge's hooks before every route's; the database before its routes.
  await app.register(httpEdge)
  await app.register(jsonBody)
  await app.register(dbPlugin, {
    config,
    ...(background === undefined ? {} : { background }),
    ...(writer === undefined ? {} : { writer })
  })
  // Docs before the routes, so swagger sees them; outside the API context, so public.
  const accessTokens = config.auth === undefined ? undefined : new AccessTokens(config.auth)
  const tokenUrl = config.auth?.tokenUrl
  await app.register(docsPlugin, {
    oauth: accessTokens && { scope: accessTokens.scope, tokenUrl: () => tokenUrl ?? accessTokens.keys.tokenEndpoint }
  })
  await app.register(healthRoutes)
  if (config.auth !== undefined) await app.register(resourceMetadata, { auth: config.auth })
  // One encapsulated context: auth guards exactly the API routes, and the
  // rate limit counts authenticated creates.
  await app.register(async (api) => {
    await api.register(authPlugin, { tokens: config.apiTokens, names: config.tokenNames, accessTokens })
    // Overload is shed before a body is read, and only here: probes and docs always answer.
    await api.register(loadShedding, { bodyLimit: config.bodyLimit })
    if (config.rateLimitPerMinute !== undefined) {
      const callers = staticCallerCount(config.apiTokens, config.tokenNames) + (config.auth?.maxClients ?? 0)
      await api.register(rateLimitPlugin, { perMinute: config.rateLimitPerMinute, callers })
    }
    await api.register(plantsRoutes)
  })
  return app
}
