import Fastify, { type FastifyInstance, type FastifyPluginAsync, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from './src/config.js'
import { AccessTokens } from './src/jwt-verification.js'
import accessLog, { loggingOptions } from './plugins/access-log.js'
import authPlugin, { staticCallerNames } from './plugins/auth.js'
import connectionRules, { connectionRuleOptions } from './plugins/connection-rules.js'
import dbPlugin, { type DbPluginOptions } from './plugins/db.js'
import docsPlugin from './plugins/docs.js'
import errorAnswers, { frameworkErrorHandler } from './plugins/error-answers.js'
import httpEdge, { edgeOptions, type ServerTimeouts } from './plugins/http-edge.js'
import jsonBody from './plugins/json-body.js'
import loadShedding from './plugins/load-shedding.js'
import rateLimitPlugin from './plugins/rate-limit.js'
import healthRoutes from './routes/health.js'
import plantsRoutes from './routes/plants.js'
import resourceMetadata from './routes/resource-metadata.js'

// The API's operations, each a file in routes/: adding one is its file and a line here.
export const API_ROUTES: ReadonlyArray<FastifyPluginAsync> = [
  plantsRoutes
]

export interface AppOptions {
  config: Config
  logger?: FastifyServerOptions['logger']
  background?: DbPluginOptions['background'] // set by the server for PostgreSQL
  timeouts?: Partial<ServerTimeouts> // tests shorten these to watch slow clients being cut off
  writer?: DbPluginOptions['writer'] // tests shrink the write queue
  store?: DbPluginOptions['store'] // tests that never read a row
  apiRoutes?: ReadonlyArray<FastifyPluginAsync> // tests add an operation of their own
}

// The whole service, built the same way for the server and for tests: the plugins, then the routes, in the order
// a request meets them (docs/architecture.md, "A request's path").
export async function buildApp ({ config, logger = false, background, timeouts, writer, store, apiRoutes = API_ROUTES }: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...edgeOptions(config, timeouts),
    ...loggingOptions(logger),
    // Errors raised before routing (a URL that does not decode), in the Error shape.
    frameworkErrors: frameworkErrorHandler,
    // The connection rules' answers to malformed HTTP, and their closing of a URL that does not decode (below).
    ...connectionRuleOptions
  }).withTypeProvider<TypeBoxTypeProvider>()

  await app.register(accessLog)
  // Spans come first, so that the request span covers every hook. The plugin is imported only when tracing is
  // configured, because the SDKs hold memory.
  if (config.tracing !== undefined) {
    await app.register((await import('./plugins/tracing.js')).default, { tracing: config.tracing })
  }
  if (config.metricsPort !== undefined) {
    await app.register((await import('./plugins/metrics.js')).default, { port: config.metricsPort, host: config.host })
  }
  await app.register(errorAnswers)
  // The connection rules this contract adds to Node's and Fastify's (plugins/connection-rules.ts): pipelined
  // requests served one at a time, the lingering close, malformed HTTP and CONNECT answered in the Error shape, an
  // unmet Expect, clients that half-close. Deleting the file, this line and the options above leaves the service
  // working, but a request pipelined behind a closing answer may be processed, an early answer may be lost to a
  // reset, and malformed HTTP gets Fastify's own answer: test/process/pipelining, lingering-close,
  // closed-means-closed, framing, http-limits, edge-answers, edge-truths and test/api/hostile, errors, logging fail.
  await app.register(connectionRules)
  await app.register(httpEdge)
  await app.register(jsonBody)
  await app.register(dbPlugin, { config, background, writer, store })

  // The docs come before the routes, so that swagger sees them, and outside the API context, so that they are public.
  const accessTokens = config.auth === undefined ? undefined : new AccessTokens(config.auth)
  await app.register(docsPlugin, {
    oauth: accessTokens && { scope: accessTokens.scope, tokenUrl: () => accessTokens.keys.tokenUrl() }
  })
  await app.register(healthRoutes)
  if (config.auth !== undefined) await app.register(resourceMetadata, { auth: config.auth })
  // One encapsulated context: auth guards exactly the API routes, overload is shed only there (probes and docs
  // always answer), and the rate limit counts authenticated creates.
  await app.register(async (api) => {
    await api.register(authPlugin, { tokens: config.apiTokens, names: config.tokenNames, accessTokens })
    // Overload answered 503 before a body is read (plugins/load-shedding.ts), by the event loop's utilisation and by
    // the bodies that have arrived. Deleting the file and this line leaves a burst of large creates free to stall
    // /health/live for seconds (3.5 s for 300 x 1 MB, 34 s for 100 x 1 MB of escaped keys, measured here):
    // test/process/overload, costly-bodies and test/api/load-shedding fail.
    await api.register(loadShedding, { bodyLimit: config.bodyLimit })
    if (config.rateLimitPerMinute !== undefined) {
      await api.register(rateLimitPlugin, {
        perMinute: config.rateLimitPerMinute,
        configured: staticCallerNames(config.apiTokens, config.tokenNames),
        maxClients: config.auth?.maxClients ?? 1
      })
    }
    for (const routes of apiRoutes) await api.register(routes)
  })
  return app
}
