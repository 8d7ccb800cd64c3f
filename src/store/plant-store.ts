import type { BaseLogger } from 'pino'
import type { Db } from './db.js'
import { asStoreError, isTransient, isUnavailable, OutcomeUnknownError, StoreUnavailableError, withDeadline } from './store-errors.js'
import { createWriteQueue, type Pending, type WriteQueueOptions } from './write-queue.js'

// A create is answered once the database has its row; creates that arrive while a write is in flight share
// the next statement (docs/architecture.md, "The write queue").

export interface PlantRecord { id: bigint, name: string, tag?: string }

export interface CreateOutcome { kind: 'created' | 'replayed' | 'conflict', plant: PlantRecord }

// What a create was told: an outcome, or "unknown" (504).
export type AnswerKind = CreateOutcome['kind'] | 'unknown'

export interface PlantStoreOptions {
  timeoutMs?: number // for the queue, then again for the batch's write with its retries; unset: none
  migrated?: boolean // until markMigrated, creates are refused and the store is not ready
  log?: Pick<BaseLogger, 'debug'>
  writer?: WriterOptions
}

export type WriterOptions = Partial<Omit<WriteQueueOptions, 'timeoutMs'>>

type Create = Pending<PlantRecord, CreateOutcome>

// The row bound matters only for bursts (bench/RESULTS.md).
const WRITER_DEFAULTS = { maxBatch: 256, maxBatchBytes: 4 * 1024 * 1024, maxQueue: 10_000 }

// Told synchronously on the create path: a watcher must be cheap.
export interface StoreObserver {
  queued?(plant: PlantRecord): void // in the caller's async context
  rejectedFull?(): void
  batchStarted?(batch: WriteBatch): void
  batchFinished?(batch: WriteBatch, failure: unknown): void
  answered?(kind: AnswerKind): void
}

export interface WriteBatch { readonly id: number, readonly creates: ReadonlyArray<{ readonly item: PlantRecord }> }

export function createPlantStore (db: Db, { timeoutMs = Infinity, migrated = true, log, writer = {} }: PlantStoreOptions = {}) {
  let isMigrated = migrated
  const observers: StoreObserver[] = []
  // A watcher that throws must change no answer nor leave a batch unanswered.
  const tell = (call: (o: StoreObserver) => void): void => {
    for (const o of observers) {
      try {
        call(o)
      } catch {}
    }
  }
  const context: WriteContext = { db, timeoutMs, onAnswer: (kind) => { if (observers.length > 0) tell((o) => o.answered?.(kind)) } }
  const queue = createWriteQueue<PlantRecord, CreateOutcome>(
    { ...WRITER_DEFAULTS, concurrency: db.writers, ...writer, timeoutMs },
    (plant) => plant.name.length + (plant.tag?.length ?? 0),
    watchedWriter(context, tell)
  )
  return {
    observe: (observer: StoreObserver): void => { observers.push(observer) },
    stats: queue.stats,
    isMigrated: (): boolean => isMigrated,
    markMigrated: (): void => { isMigrated = true },
    // Resolves once the row is committed. Not async: one promise per create, the queue's.
    create (plant: PlantRecord): Promise<CreateOutcome> {
      if (!isMigrated) return Promise.reject(new StoreUnavailableError('The database is not ready yet'))
      if (queue.full()) tell((o) => o.rejectedFull?.())
      else if (observers.length > 0) tell((o) => o.queued?.(plant))
      return queue.enqueue(plant)
    },
    isReady: readinessProbe(db, Math.min(timeoutMs, READY_TIMEOUT_MS), () => isMigrated, log)
  }
}

export type PlantStore = ReturnType<typeof createPlantStore>

function watchedWriter (context: WriteContext, tell: (call: (o: StoreObserver) => void) => void): (batch: Create[]) => Promise<void> {
  let batches = 0
  return async (batch) => {
    const event: WriteBatch = { id: ++batches, creates: batch }
    tell((o) => o.batchStarted?.(event))
    const failure = await settle(context, groupById(batch), performance.now() + context.timeoutMs, { unconfirmed: false })
      .catch((err: unknown) => {
        // A bug must not leave a request waiting forever (answered ones ignore this).
        for (const p of batch) p.reject(err)
        return err
      })
    tell((o) => o.batchFinished?.(event, failure))
  }
}

// Orchestrators give a probe 1 s by default, however long DB_TIMEOUT_MS.
const READY_TIMEOUT_MS = 800

// A write can commit now (docs/operations.md, "Health"): a read-only session raises 25006, so its connection
// is dropped; the WAL message's commit waits for a synchronous standby as a create's does.
const probeSql =
  'DO $$ BEGIN IF pg_is_in_recovery() OR current_setting(\'transaction_read_only\')::boolean THEN ' +
  'RAISE EXCEPTION \'the database does not accept writes\' USING ERRCODE = \'read_only_sql_transaction\'; END IF; ' +
  'PERFORM pg_logical_emit_message(true, \'plant-store\', \'ready\'); END $$'

// With less than a WAL segment free, every commit fails (PGlite on disk only).
const MIN_FREE_BYTES = 16 * 1024 * 1024

async function probeCommit (db: Db): Promise<void> {
  await (db.probe === undefined ? db.exec(probeSql) : db.probe(probeSql))
  if (db.freeBytes !== undefined && await db.freeBytes() < MIN_FREE_BYTES) {
    throw new StoreUnavailableError('less than one WAL segment is free on the embedded database\'s disk')
  }
}

// One probe at a time, so a stalled commit holds one connection, never one per probe.
function readinessProbe (db: Db, boundMs: number, migrated: () => boolean, log?: Pick<BaseLogger, 'debug'>): () => Promise<boolean> {
  let inFlight: Promise<void> | undefined
  return async () => {
    if (!migrated()) return false
    inFlight ??= probeCommit(db).finally(() => { inFlight = undefined })
    return await withDeadline(inFlight, boundMs, 'readiness check').then(() => true, (err: unknown) => {
      // At debug: the refused creates and the migration retries show an outage at warn.
      log?.debug({ err }, 'readiness check failed')
      return false
    })
  }
}

// Stored rows come from a second statement, which sees rows committed after the INSERT began.
export const insertBatchSql =
  'INSERT INTO plants (id, name, tag) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) ' +
  'ON CONFLICT (id) DO NOTHING RETURNING id'
// One row per request (`i`, from 1). The database compares (collation "C"): PGlite drops a leading U+FEFF it returns.
export const selectBatchSql =
  'SELECT r.i::int AS i, p.name, p.tag, ' +
  '(p.name IS NOT DISTINCT FROM r.name COLLATE "C" AND p.tag IS NOT DISTINCT FROM r.tag COLLATE "C") AS same ' +
  'FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS r(id, name, tag, i) ' +
  'JOIN plants p ON p.id = r.id'
// Prepared once per connection: planning is a large share of the server's work (bench/RESULTS.md).
const insertStatement = { name: 'plants_insert_batch' }
const selectStatement = { name: 'plants_select_batch' }

// A row neither written nor found was held by a transaction that rolled back in between.
const MAX_ATTEMPTS = 5

// Jittered, so that replicas do not retry in step.
const RETRY_FIRST_MS = 25
const RETRY_MAX_MS = 500

interface WriteContext { db: Db, timeoutMs: number, onAnswer: (kind: AnswerKind) => void }

// The requests of a batch naming one id; the first one's plant is stored. By the bigint: text cost more (bench/RESULTS.md).
interface Group { id: bigint, members: Create[] }

// A write sent and not confirmed may still commit: every later failure of its groups is "unknown" (504).
interface Sent { unconfirmed: boolean }

// Returns the error that failed the groups, so writing rows one by one can
// stop when the database is gone. Nothing is sent past the deadline.
async function settle (ctx: WriteContext, groups: Group[], deadline: number, sent: Sent): Promise<unknown> {
  let pending = groups
  let outageRetries = 0
  for (let attempt = 1; pending.length > 0; attempt++) {
    if (attempt > MAX_ATTEMPTS) return failAll(ctx, pending, new Error(`rows vanished ${MAX_ATTEMPTS} times between INSERT and SELECT`))
    if (performance.now() >= deadline) {
      return failAll(ctx, pending, failureAfter(new StoreUnavailableError(`writing the batch took longer than ${ctx.timeoutMs} ms`), sent))
    }
    let unanswered = pending
    try {
      unanswered = await insert(ctx, pending, deadline)
      pending = unanswered.length === 0
        ? []
        : await withDeadline(answerExisting(ctx, unanswered), Math.max(0, deadline - performance.now()), 'reading the stored plants')
    } catch (err) {
      // Only a write's outcome can be unknown: the SELECT reads.
      if (err instanceof OutcomeUnknownError) sent.unconfirmed = true
      // Safe to send again: a row the failed statement stored is a replay. Not a vanished row: the attempt is not counted.
      if (isTransient(err) && await pauseBeforeRetry(outageRetries++, deadline)) {
        pending = unanswered
        attempt--
        continue
      }
      if (isUnavailable(err) || err instanceof OutcomeUnknownError || unanswered.length === 1) {
        return failAll(ctx, unanswered, failureAfter(err, sent))
      }
      // Something in the batch cannot be stored: each row alone, so only the row at fault fails.
      for (let i = 0; i < unanswered.length; i++) {
        const failure = await settle(ctx, [unanswered[i] as Group], deadline, { ...sent })
        if (isUnavailable(failure) || failure instanceof OutcomeUnknownError) {
          return failAll(ctx, unanswered.slice(i + 1), failureAfter(failure, sent))
        }
      }
      return undefined
    }
  }
  return undefined
}

function failureAfter (err: unknown, sent: Sent): unknown {
  if (!sent.unconfirmed) return asStoreError(err)
  return err instanceof OutcomeUnknownError ? err : new OutcomeUnknownError('a write of this row was not confirmed', { cause: err })
}

// True when it waited; not past the deadline, and with none nothing would bound the retries.
async function pauseBeforeRetry (n: number, deadline: number): Promise<boolean> {
  const ms = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** n) * (0.5 + Math.random() / 2)
  if (!Number.isFinite(deadline) || performance.now() + ms >= deadline) return false
  await new Promise((resolve) => setTimeout(resolve, ms))
  return true
}

// Returns the groups whose id was already stored.
async function insert (ctx: WriteContext, groups: Group[], deadline: number): Promise<Group[]> {
  const plants = columns(groups.map((g) => (g.members[0] as Create).item))
  const rows = await ctx.db.writeBefore<{ id: unknown }>(deadline, insertBatchSql, plants, insertStatement)
  const created = new Set(rows.map((row) => toId(row.id)))
  for (const g of groups) {
    if (!created.has(g.id)) continue
    // The others of the batch are compared with the first (both the requests' own strings).
    const first = (g.members[0] as Create).item
    g.members.forEach((p, i) => {
      const same = p.item.name === first.name && p.item.tag === first.tag
      answer(p, i === 0 ? 'created' : same ? 'replayed' : 'conflict', first, ctx)
    })
  }
  return groups.filter((g) => !created.has(g.id))
}

// A type, not an interface, so it is a Row (which has an index signature).
type Compared = { name: string, tag: string | null, same: boolean }

// Returns the groups whose row is gone.
async function answerExisting (ctx: WriteContext, groups: Group[]): Promise<Group[]> {
  const params = columns(groups.flatMap((g) => g.members.map((p) => p.item)))
  const rows = await ctx.db.query<Compared & { i: number }>(selectBatchSql, params, selectStatement)
  const byRequest = new Map<number, Compared>(rows.map((row) => [Number(row.i), row]))
  const missing: Group[] = []
  let n = 0
  for (const g of groups) {
    const at = n + 1
    n += g.members.length
    // A group's requests name one id: stored for all, or none.
    if (!byRequest.has(at)) {
      missing.push(g)
      continue
    }
    g.members.forEach((p, i) => {
      const { name, tag, same } = byRequest.get(at + i) as Compared
      answer(p, same ? 'replayed' : 'conflict', tag === null ? { id: g.id, name } : { id: g.id, name, tag }, ctx)
    })
  }
  return missing
}

// Ids travel as decimal text cast to bigint[], so no driver sees a rounded number.
function columns (plants: PlantRecord[]): unknown[] {
  return [plants.map((p) => p.id.toString()), plants.map((p) => p.name), plants.map((p) => p.tag ?? null)]
}

// pg returns int8 as a string, PGlite as a number or a bigint.
function toId (value: unknown): bigint {
  if (typeof value === 'bigint') return value
  if (typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value))) return BigInt(value)
  throw new TypeError(`not an int8 value: ${typeof value}`)
}

// In ascending id order, so concurrent batches (here or in another instance) take row locks in one order: no deadlock.
function groupById (batch: Create[]): Group[] {
  const byId = new Map<bigint, Group>()
  for (const p of batch) {
    const group = byId.get(p.item.id)
    if (group === undefined) byId.set(p.item.id, { id: p.item.id, members: [p] })
    else group.members.push(p)
  }
  return [...byId.values()].sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
}

// A replay is answered with the plant it sent, a conflict with the stored one.
function answer (p: Create, kind: CreateOutcome['kind'], stored: PlantRecord, ctx: WriteContext): void {
  ctx.onAnswer(kind)
  p.resolve({ kind, plant: kind === 'conflict' ? stored : p.item })
}

function failAll (ctx: WriteContext, groups: Group[], err: unknown): unknown {
  for (const p of groups.flatMap((g) => g.members)) {
    if (err instanceof OutcomeUnknownError) ctx.onAnswer('unknown')
    p.reject(err)
  }
  return err
}
