import fp from 'fastify-plugin'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { context, propagation, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api'
import { NodeTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-node'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../src/config.js'
import { TRACE_ID_FIELD, traceIdOf } from './access-log.js'
import type { PlantRecord, StoreObserver } from '../src/store/plant-store.js'

export interface TracingOptions { tracing: NonNullable<Config['tracing']> }

// @fastify/otel patches nothing, so no import hooks; the SDK reads the standard variables (docs/operations.md, "Traces").
async function tracingPlugin (fastify: FastifyInstance, opts: TracingOptions): Promise<void> {
  const exporter = opts.tracing.protocol === 'http/json' ? new JsonExporter() : new ProtobufExporter()
  const resource = resourceFromAttributes({ 'service.name': 'plant-store' }).merge(detectResources({ detectors: [envDetector] }))
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] })
  provider.register()
  // A span per hook per request would tell nothing the request and write spans do not.
  const instrumentation = new FastifyOtelInstrumentation({
    instrumentHooks: false,
    instrumentHandler: false,
    recordExceptions: false,
    requestHook: (span, request) => span.updateName(`${request.method} ${request.routeOptions.url ?? 'unmatched'}`)
  })
  instrumentation.setTracerProvider(provider)
  await fastify.register(instrumentation.plugin())

  // Log lines carry the trace id also when the trace starts here (a traceparent's is bound already).
  fastify.addHook('onRequest', (request, reply, done) => {
    const ctx = request.opentelemetry().context
    const traceId = ctx === null ? undefined : trace.getSpan(ctx)?.spanContext().traceId
    if (traceId !== undefined && traceIdOf(request.headers.traceparent) !== traceId) {
      request.log = request.log.child({ [TRACE_ID_FIELD]: traceId })
      reply.log = request.log
    }
    done()
  })
  // The handler runs synchronously from done(): in the span's context, which the store sees.
  fastify.addHook('preHandler', (request, _reply, done) => {
    const ctx = request.opentelemetry().context
    if (ctx === null) done()
    else context.with(ctx, done)
  })

  fastify.addHook('onReady', async () => {
    fastify.plants.observe(databaseSpans(provider.getTracer('plant-store'), fastify.db.kind))
  })
  fastify.addHook('onClose', async () => {
    instrumentation.disable()
    // Exports the spans still buffered; then an app built later in the process (tests) can register its own.
    await provider.shutdown().finally(() => {
      trace.disable()
      context.disable()
      propagation.disable()
    })
  })
}

// A child of each create's request span, from its batch's statement to its answer.
function databaseSpans (tracer: Tracer, database: 'postgres' | 'pglite'): StoreObserver {
  const parents = new WeakMap<PlantRecord, Context>()
  const spans = new WeakMap<PlantRecord, Span>()
  const write = { 'db.system.name': 'postgresql', 'db.operation.name': 'INSERT', 'plant_store.database': database }
  return {
    queued: (plant) => { parents.set(plant, context.active()) },
    batchStarted (batch) {
      const attributes = { ...write, 'plant_store.batch.id': batch.id, 'plant_store.batch.size': batch.creates.length }
      for (const { item: plant } of batch.creates) {
        const parent = parents.get(plant)
        if (parent !== undefined) spans.set(plant, tracer.startSpan('plant_store.write', { attributes }, parent))
      }
    },
    batchFinished (batch, failure) {
      for (const { item: plant } of batch.creates) {
        const span = spans.get(plant)
        if (span === undefined) continue
        // The error's name only: a database message can quote plant data.
        if (failure !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: failure instanceof Error ? failure.name : 'write failed' })
        span.end()
      }
    }
  }
}

export default fp(tracingPlugin, { name: 'tracing', fastify: '5.x' })
