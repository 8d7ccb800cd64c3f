import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { AnswerKind, StoreObserver, WriterStats } from './store/plant-store.js'
import type { PoolStats } from './store/db.js'

// In a registry of the service's own; docs/operations.md, "Metrics", explains each.

// The route label of a request no route matched, so scanners cannot grow the label set.
export const UNMATCHED_ROUTE = 'unmatched'

// Seconds; the top buckets catch creates waiting on a slow database.
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
// Creates per write, up to the writer's bound (src/store/plant-store.ts).
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
const OUTCOMES: readonly AnswerKind[] = ['created', 'replayed', 'conflict', 'unknown']
// Past this many callers the rest share one label, so the series stay few.
const MAX_CALLER_LABELS = 100
const OTHER_CALLER = 'other'

export type Metrics = ReturnType<typeof createMetrics>

export function createMetrics (sources: { writer: () => WriterStats, pool?: (() => PoolStats) | undefined, ready: () => Promise<boolean> }) {
  const registry = new Registry()
  const registers = [registry]
  collectDefaultMetrics({ register: registry })
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from the request\'s arrival to its answer, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: DURATION_BUCKETS,
    registers
  })
  const creates = new Counter({
    name: 'plant_store_creates_total',
    help: 'Creates answered from the database: created (a new row), replayed (the same plant was stored), conflict (a different one was), unknown (sent and not confirmed in time: 504)',
    labelNames: ['outcome'] as const,
    registers
  })
  // Each outcome's series exists, at 0, from the start.
  const byOutcome = new Map(OUTCOMES.map((kind) => [kind, creates.labels(kind)]))
  const byCaller = new Counter({
    name: 'plant_store_creates_by_caller_total',
    help: `Answered creates by caller (a static token's name or digest, a JWT's client_id; past ${MAX_CALLER_LABELS} callers, "${OTHER_CALLER}") and outcome`,
    labelNames: ['caller', 'outcome'] as const,
    registers
  })
  const callers = new Set<string>()
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
  scrapedGauges(registry, sources)
  return {
    registry,
    observeRequest: (method: string, route: string, status: number, seconds: number) => {
      duration.observe({ method, route, status_code: status }, seconds)
    },
    // By the caller plugins/auth.ts found; the first ones seen keep their own label.
    observeCreate: (caller: string, outcome: AnswerKind) => {
      if (!callers.has(caller) && callers.size < MAX_CALLER_LABELS && caller !== OTHER_CALLER) callers.add(caller)
      byCaller.labels(callers.has(caller) ? caller : OTHER_CALLER, outcome).inc()
    },
    store: {
      answered: (kind) => byOutcome.get(kind)?.inc(),
      rejectedFull: () => rejectedFull.inc(),
      batchStarted: (batch) => batchSize.observe(batch.creates.length)
    } satisfies StoreObserver
  }
}

// Read when scraped, so the create path does no work for them.
function scrapedGauges (registry: Registry, { writer, pool, ready }: Parameters<typeof createMetrics>[0]): void {
  gauge(registry, 'plant_store_write_queue_depth', 'Creates waiting for a database write now', () => writer().queueDepth)
  gauge(registry, 'plant_store_writes_in_flight', 'Database writes running now', () => writer().inFlight)
  if (pool !== undefined) {
    gauge(registry, 'plant_store_db_pool_connections', 'PostgreSQL connections open', () => pool().total)
    gauge(registry, 'plant_store_db_pool_idle_connections', 'PostgreSQL connections open and idle', () => pool().idle)
    gauge(registry, 'plant_store_db_pool_waiting_clients', 'Queries waiting for a PostgreSQL connection', () => pool().waiting)
  }
  // For the alert on a replica not ready (deploy/prometheus/).
  const help = 'Whether this replica is ready: migrations applied and a write can commit now (GET /health/ready), 0 while shutting down'
  gauge(registry, 'plant_store_ready', help, async () => await ready() ? 1 : 0)
}

function gauge (registry: Registry, name: string, help: string, read: () => number | Promise<number>): void {
  // eslint-disable-next-line no-new
  new Gauge({ name, help, registers: [registry], async collect () { this.set(await read()) } })
}
