import type { FastifyBaseLogger } from 'fastify'
import type { Db } from './db.js'
import { StoreUnavailableError, withDeadline } from './unavailable.js'
import type { CreateOutcome, PlantRecord } from './plant-record.js'
import { createWriteQueue, type Pending } from './write-queue.js'
import { writeBatch } from './batch-write.js'

export type { CreateOutcome, PlantRecord } from './plant-record.js'

// The plant store answers every create: created, replayed (the same plant
// was already stored), conflict (a different one was), or unavailable (a
// StoreUnavailableError, answered 503: not migrated yet, the database is
// down or too slow, too many creates waiting).
//
// Every create is an INSERT that must reach the database before it is
// answered. One statement per request makes the database round trip the
// limit; gathering the creates that arrive while a write is in flight into
// one statement makes the machine the limit instead: the batching writer,
// a queue (write-queue.ts) feeding one write per batch (batch-write.ts).

export interface PlantStoreOptions {
  // DB_TIMEOUT_MS: how long a create may wait for a writer, and how long
  // one batch may take to write, retries included (see the batching
  // writer). The readiness check is held to the shorter READY_TIMEOUT_MS.
  timeoutMs: number
  // True once the migrations are applied; until then creates are refused.
  ready: () => boolean
  // Where a failed readiness check is logged.
  log?: Pick<FastifyBaseLogger, 'debug'>
  // Batch size, queue bound and writers in flight; defaults suit production.
  writer?: BatchWriterOptions
}

// What the store tells whoever watches it (metrics, tracing) without knowing
// who: every method is optional and runs synchronously on the create path,
// so a watcher must be cheap. With no watcher nothing is called.
export interface StoreObserver {
  // A create joined the queue; called in the caller's async context.
  queued?(plant: PlantRecord): void
  // A create was refused because maxQueue creates were already waiting (503).
  rejectedFull?(): void
  // One write (an INSERT … unnest for the whole batch, then a SELECT for
  // the ids already stored) starts or ends; failure is what failed it.
  batchStarted?(batch: WriteBatch): void
  batchFinished?(batch: WriteBatch, failure: unknown): void
  // What the database did with one create, which is what its caller is told.
  answered?(kind: CreateOutcome['kind']): void
}

export interface WriteBatch {
  // Numbers the batches of this store, from 1.
  readonly id: number
  readonly creates: ReadonlyArray<{ readonly plant: PlantRecord }>
}

// The writer's state right now, read when metrics are scraped.
export interface WriterStats {
  queueDepth: number
  inFlight: number
}

export function createPlantStore (db: Db, { timeoutMs, ready, log, writer: writerOptions }: PlantStoreOptions) {
  const writer = createBatchWriter(db, { ...writerOptions, timeoutMs })
  return {
    observe: writer.observe,
    stats: writer.stats,
    // Whether the migrations are applied: the readiness probe says why it is not ready.
    isMigrated: ready,
    // Stores a new plant, or recognises a retry of the same plant, or
    // refuses one that would overwrite a different plant. Resolves only once
    // the row is committed; rejects only when it was not written. Waits at
    // most DB_TIMEOUT_MS for a writer; the write is then bounded by the
    // database (see writeBatch). Not async: one promise per create, the
    // writer's.
    create (plant: PlantRecord): Promise<CreateOutcome> {
      if (!ready()) return Promise.reject(new StoreUnavailableError('The database is not ready yet'))
      return writer.create(plant)
    },
    // Migrations are applied and the database accepts writes, answered
    // within a probe's timeout.
    async isReady (): Promise<boolean> {
      if (!ready()) return false
      try {
        await withDeadline(db.query(writableSql), Math.min(timeoutMs, READY_TIMEOUT_MS), 'readiness check')
        return true
      } catch (err) {
        // Asked by every probe: at debug. An outage shows at warn where it
        // matters, in the creates it refuses and the migration retries.
        log?.debug({ err }, 'readiness check failed')
        return false
      }
    }
  }
}

export type PlantStore = ReturnType<typeof createPlantStore>

// Orchestrators and balancers give a probe 1 s by default: the check ends
// before that, however long DB_TIMEOUT_MS is (it is set long to ride out a
// failover) and however the database hangs.
const READY_TIMEOUT_MS = 800

// Ready means writable: a standby answers SELECT 1 and refuses every write.
// Not writable raises the error a write would get (25006), so the check
// fails and the pool drops the connection, as it drops every connection a
// statement failed on: a session that started read-only (a database set
// read-only, then writable again) is never handed to a create.
const writableSql =
  'DO $$ BEGIN IF pg_is_in_recovery() OR current_setting(\'transaction_read_only\')::boolean THEN ' +
  'RAISE EXCEPTION \'the database does not accept writes\' USING ERRCODE = \'read_only_sql_transaction\'; END IF; END $$'

export interface BatchWriterOptions {
  // Rows written by one statement at most.
  maxBatch?: number
  // Creates waiting for a writer at most; past it create() refuses with
  // StoreUnavailableError (503).
  maxQueue?: number
  // Batches in flight at once; the backend's own number (Db.writers) by
  // default.
  concurrency?: number
  // Characters of names and tags written by one statement at most: a
  // batch of large plants must still fit in its deadline.
  maxBatchBytes?: number
  // DB_TIMEOUT_MS: how long a create may wait in the queue, and how long a
  // batch has from its take (see batch-write.ts). Unset: no deadline.
  timeoutMs?: number
}

// Under a usual load batches stay far below the row bound, so it only
// matters for bursts (bench/RESULTS.md).
export const DEFAULT_MAX_BATCH = 256
export const DEFAULT_MAX_BATCH_BYTES = 4 * 1024 * 1024
export const DEFAULT_MAX_QUEUE = 10_000

export interface BatchWriter {
  create(plant: PlantRecord): Promise<CreateOutcome>
  observe(observer: StoreObserver): void
  stats(): WriterStats
}

// The queue and the write, with whoever watches them. A watcher that throws
// must not change what a create is told, nor leave a taken batch
// unanswered: its failure is dropped.
export function createBatchWriter (db: Db, options: BatchWriterOptions = {}): BatchWriter {
  const timeoutMs = options.timeoutMs ?? Infinity
  const observers: StoreObserver[] = []
  const tell = (call: (o: StoreObserver) => void): void => {
    for (const o of observers) {
      try {
        call(o)
      } catch {}
    }
  }
  const context = {
    db,
    timeoutMs,
    onAnswer: (kind: CreateOutcome['kind']): void => {
      if (observers.length > 0) tell((o) => o.answered?.(kind))
    }
  }
  let batches = 0
  const write = async (batch: Pending[]): Promise<void> => {
    const event: WriteBatch = { id: ++batches, creates: batch }
    tell((o) => o.batchStarted?.(event))
    let failure: unknown
    try {
      failure = await writeBatch(context, batch)
    } catch (err) {
      // A bug in the write must not leave a request waiting forever;
      // requests already answered ignore this.
      failure = err
      for (const p of batch) p.reject(err)
    }
    tell((o) => o.batchFinished?.(event, failure))
  }
  const queue = createWriteQueue({
    maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
    maxBatchBytes: options.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES,
    maxQueue: options.maxQueue ?? DEFAULT_MAX_QUEUE,
    concurrency: options.concurrency ?? db.writers,
    timeoutMs
  }, write)
  return {
    create (plant) {
      if (queue.full()) tell((o) => o.rejectedFull?.())
      else if (observers.length > 0) tell((o) => o.queued?.(plant))
      return queue.enqueue(plant)
    },
    observe (observer) {
      observers.push(observer)
    },
    stats: () => ({ queueDepth: queue.depth(), inFlight: queue.inFlight() })
  }
}
