import { context, propagation, trace } from '@opentelemetry/api'
import { NodeTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-node'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import type { Config } from '../../src/config.js'

// The OpenTelemetry SDK, started only when spans are exported (Config
// tracing, from OTEL_EXPORTER_OTLP_ENDPOINT). It registers the global tracer
// provider, the W3C propagator and an AsyncLocalStorage context manager;
// @fastify/otel then needs no require or import hooks (it patches nothing,
// it is a Fastify plugin), so the SDK can start inside the app rather than
// through `node --import`. The exporter reads the rest of the standard
// variables itself (endpoint, headers, timeout), the provider reads the
// sampler and batch settings (OTEL_TRACES_SAMPLER, OTEL_BSP_*).

export const SERVICE_NAME = 'plant-store'

export interface Tracing {
  provider: NodeTracerProvider
  // Exports the spans still buffered, then unregisters the globals.
  shutdown(): Promise<void>
}

export function startTracing ({ protocol }: NonNullable<Config['tracing']>): Tracing {
  const exporter = protocol === 'http/json' ? new JsonExporter() : new ProtobufExporter()
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the default name.
  const resource = resourceFromAttributes({ 'service.name': SERVICE_NAME }).merge(detectResources({ detectors: [envDetector] }))
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] })
  provider.register()
  return {
    provider,
    async shutdown () {
      try {
        await provider.shutdown()
      } finally {
        // So an app built after this one in the same process (tests) can
        // register its own.
        trace.disable()
        context.disable()
        propagation.disable()
      }
    }
  }
}
