import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { CreateOutcome, StoreObserver, WriterStats } from '../../src/store/plant-store.js'
import type { PoolStats } from '../../src/store/db.js'

// What GET /metrics shows (Prometheus text format), in one registry of the
// service's own: the metric names, labels and buckets live here, the wiring
// in metrics-plugin.ts. README "Operating" explains each to an on-call person.

// The route label of a request no route matched: scanners' URLs all count
// here, so they cannot grow the label set.
export const UNMATCHED_ROUTE = 'unmatched'

// Seconds. The API answers in milliseconds; the top buckets catch creates
// waiting on a slow database (DB_TIMEOUT_MS defaults to 5 s).
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
// Creates per write; the writer's bound is 256 (DEFAULT_MAX_BATCH).
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]

export interface MetricSources {
  writer: () => WriterStats
  // PostgreSQL only.
  pool?: () => PoolStats
}

export interface Metrics {
  registry: Registry
  // One answered request: method, route pattern, status, seconds.
  observeRequest(method: string, route: string, status: number, seconds: number): void
  // Counts what the plant store does.
  store: StoreObserver
}

export function createMetrics (sources: MetricSources): Metrics {
  const registry = new Registry()
  const registers = [registry]
  // Event-loop lag, heap, GC, CPU, file descriptors.
  collectDefaultMetrics({ register: registry })

  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from the request\'s arrival to its answer, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: DURATION_BUCKETS,
    registers
  })
  // The label children, looked up once per method, route and status.
  const durationByLabels = new Map<string, Histogram.Internal<'method' | 'route' | 'status_code'>>()

  const creates = new Counter({
    name: 'plant_store_creates_total',
    help: 'Creates the database answered: created (a new row), replayed (the same plant was stored), conflict (a different one was)',
    labelNames: ['outcome'] as const,
    registers
  })
  const byOutcome: Record<CreateOutcome['kind'], Counter.Internal> = {
    created: creates.labels('created'),
    replayed: creates.labels('replayed'),
    conflict: creates.labels('conflict')
  }
  const batchSize = new Histogram({
    name: 'plant_store_write_batch_size',
    help: 'Creates written by one database write (the batching writer gathers the creates that arrive together)',
    buckets: BATCH_BUCKETS,
    registers
  })
  const rejectedFull = new Counter({
    name: 'plant_store_creates_rejected_queue_full_total',
    help: 'Creates refused with 503 because 10,000 creates were already waiting for the database',
    registers
  })
  gauge(registry, 'plant_store_write_queue_depth', 'Creates waiting for a database write now', () => sources.writer().queueDepth)
  gauge(registry, 'plant_store_writes_in_flight', 'Database writes running now', () => sources.writer().inFlight)
  const pool = sources.pool
  if (pool !== undefined) {
    gauge(registry, 'plant_store_db_pool_connections', 'PostgreSQL connections open', () => pool().total)
    gauge(registry, 'plant_store_db_pool_idle_connections', 'PostgreSQL connections open and idle', () => pool().idle)
    gauge(registry, 'plant_store_db_pool_waiting_clients', 'Queries waiting for a PostgreSQL connection', () => pool().waiting)
  }

  return {
    registry,
    observeRequest (method, route, status, seconds) {
      const key = `${method} ${status} ${route}`
      let child = durationByLabels.get(key)
      if (child === undefined) {
        child = duration.labels(method, route, String(status))
        durationByLabels.set(key, child)
      }
      child.observe(seconds)
    },
    store: {
      answered: (kind) => byOutcome[kind].inc(),
      rejectedFull: () => rejectedFull.inc(),
      batchStarted: (batch) => batchSize.observe(batch.creates.length)
    }
  }
}

// A gauge read when scraped, so the create path does no work for it.
function gauge (registry: Registry, name: string, help: string, read: () => number): void {
  // eslint-disable-next-line no-new
  new Gauge({ name, help, registers: [registry], collect () { this.set(read()) } })
}
