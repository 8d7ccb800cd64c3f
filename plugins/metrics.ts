import fp from 'fastify-plugin'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { createMetrics, UNMATCHED_ROUTE, type Metrics } from '../src/metrics.js'
import { errorBody, JSON_CONTENT_TYPE } from '../src/http-error.js'
import { listenError } from '../src/config.js'

// METRICS_PORT (0: any free port) on HOST.
export interface MetricsOptions { port: number, host: string }

const METRICS_PATH = '/metrics'

// A listener of its own (docs/operations.md, "Metrics"); before the routes, so every answer is timed, 404s included.
async function metricsPlugin (fastify: FastifyInstance, opts: MetricsOptions): Promise<void> {
  let metrics: Metrics | undefined
  let server: Server | undefined
  let closing = false
  fastify.addHook('preClose', async () => { closing = true })

  fastify.addHook('onResponse', (request, reply, done) => {
    metrics?.observeRequest(request.method, request.routeOptions.url ?? UNMATCHED_ROUTE, reply.statusCode, reply.elapsedTime / 1000)
    if (request.createOutcome !== null && request.caller !== null) metrics?.observeCreate(request.caller, request.createOutcome)
    done()
  })

  // Once the store exists; a port that cannot be bound stops start-up like the API's.
  fastify.addHook('onReady', async () => {
    const { plants, db } = fastify
    const scraped = createMetrics({ writer: plants.stats, pool: db.poolStats?.bind(db), ready: async () => !closing && await plants.isReady() })
    metrics = scraped
    plants.observe(scraped.store)
    server = createServer((req, res) => { answerScrape(scraped, req, res).catch(() => res.destroy()) })
    await once(server.listen(opts.port, opts.host), 'listening').catch((err: unknown) => {
      throw listenError('METRICS_PORT', opts.host, opts.port, err)
    })
    const { port } = server.address() as AddressInfo
    fastify.log.info({ port }, `metrics served at http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}${METRICS_PATH}`)
  })

  // After the API has drained, so a last scrape can still see the shutdown.
  fastify.addHook('onClose', async () => {
    if (server === undefined || !server.listening) return
    const closed = once(server.close(), 'close')
    server.closeAllConnections()
    await closed
  })
}

async function answerScrape (metrics: Metrics, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? '').split('?')[0]
  if (path !== METRICS_PATH) return sendJsonError(res, 404, `Route ${req.method ?? ''} ${path ?? ''} not found; metrics are at ${METRICS_PATH}`.slice(0, 200))
  if (req.method !== 'GET' && req.method !== 'HEAD') return sendJsonError(res, 405, `Method ${req.method ?? ''} is not allowed on ${METRICS_PATH}; use GET`, { allow: 'GET, HEAD' })
  const text = await metrics.registry.metrics().catch(() => undefined)
  if (text === undefined) return sendJsonError(res, 500, 'Internal Server Error')
  res.writeHead(200, { 'content-type': metrics.registry.contentType, 'cache-control': 'no-store' })
  res.end(req.method === 'HEAD' ? undefined : text)
}

function sendJsonError (res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(errorBody(status, message))
  res.writeHead(status, { ...headers, 'content-type': JSON_CONTENT_TYPE, 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

export default fp(metricsPlugin, { name: 'metrics', fastify: '5.x', dependencies: ['access-log'] })
