import type { FastifyBaseLogger } from 'fastify'
import type { Db } from './db.js'
import { asStoreError, isTransient, isUnavailable, OutcomeUnknownError, StoreUnavailableError, withDeadline } from './store-errors.js'
import { createWriteQueue, type Pending, type WriteQueueOptions } from './write-queue.js'

// Every create is answered only once the database has its row: the creates
// that arrive while a write is in flight share the next statement, so the
// machine, not the round trip, is the limit. The queue (write-queue.ts)
// decides when a batch goes; this file writes it and tells each create
// what the database did with its row (docs/architecture.md, "The write
// queue").

// A plant as the store keeps it: the exact int64 id, tag absent as undefined.
export interface PlantRecord {
  id: bigint
  name: string
  tag?: string
}

export type CreateOutcome =
  | { kind: 'created', plant: PlantRecord }
  | { kind: 'replayed', plant: PlantRecord }
  | { kind: 'conflict', plant: PlantRecord }

// What a create was told: an outcome, or "unknown" (504).
export type AnswerKind = CreateOutcome['kind'] | 'unknown'

export interface PlantStoreOptions {
  // DB_TIMEOUT_MS: how long a create may wait for a writer, and how long
  // one batch may take to write, retries included (see settle). The
  // readiness check is held to the shorter READY_TIMEOUT_MS. Unset: no
  // deadline.
  timeoutMs?: number
  // Whether the migrations are applied already (default true); until they
  // are (markMigrated), creates are refused and the store is not ready.
  migrated?: boolean
  // Where a failed readiness check is logged.
  log?: Pick<FastifyBaseLogger, 'debug'>
  // The queue's bounds; the defaults below suit production, and batches in
  // flight default to the backend's own number (Db.writers).
  writer?: WriterOptions
}

export type WriterOptions = Partial<Omit<WriteQueueOptions, 'timeoutMs'>>

// Under a usual load batches stay far below the row bound, so it only
// matters for bursts (bench/RESULTS.md).
export const DEFAULT_MAX_BATCH = 256
export const DEFAULT_MAX_BATCH_BYTES = 4 * 1024 * 1024
export const DEFAULT_MAX_QUEUE = 10_000

// What the store tells its watchers (metrics, tracing): every method runs
// synchronously on the create path, so a watcher must be cheap.
export interface StoreObserver {
  // A create joined the queue; called in the caller's async context.
  queued?(plant: PlantRecord): void
  // A create was refused because maxQueue creates were already waiting (503).
  rejectedFull?(): void
  // One batch's write starts or ends; failure is what failed it.
  batchStarted?(batch: WriteBatch): void
  batchFinished?(batch: WriteBatch, failure: unknown): void
  answered?(kind: AnswerKind): void
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

export function createPlantStore (db: Db, { timeoutMs = Infinity, migrated = true, log, writer = {} }: PlantStoreOptions = {}) {
  let isMigrated = migrated
  const observers: StoreObserver[] = []
  // A watcher that throws must not change what a create is told, nor leave
  // a taken batch unanswered: its failure is dropped.
  const tell = (call: (o: StoreObserver) => void): void => {
    for (const o of observers) {
      try {
        call(o)
      } catch {}
    }
  }
  const context: WriteContext = {
    db,
    timeoutMs,
    onAnswer: (kind) => { if (observers.length > 0) tell((o) => o.answered?.(kind)) }
  }
  const queue = createWriteQueue({
    maxBatch: writer.maxBatch ?? DEFAULT_MAX_BATCH,
    maxBatchBytes: writer.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES,
    maxQueue: writer.maxQueue ?? DEFAULT_MAX_QUEUE,
    concurrency: writer.concurrency ?? db.writers,
    timeoutMs
  }, watchedWriter(context, tell))
  return {
    observe (observer: StoreObserver): void {
      observers.push(observer)
    },
    stats: (): WriterStats => ({ queueDepth: queue.depth(), inFlight: queue.inFlight() }),
    // Whether the migrations are applied: the readiness probe says why it is not ready.
    isMigrated: (): boolean => isMigrated,
    markMigrated (): void {
      isMigrated = true
    },
    // Resolves only once the row is committed; rejects with
    // StoreUnavailableError only when it was not written, with
    // OutcomeUnknownError when it may have been. Not async: one promise per
    // create, the queue's.
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

// The queue's write, numbered and told to the watchers.
function watchedWriter (context: WriteContext, tell: (call: (o: StoreObserver) => void) => void): (batch: Pending[]) => Promise<void> {
  let batches = 0
  return async (batch) => {
    const event: WriteBatch = { id: ++batches, creates: batch }
    tell((o) => o.batchStarted?.(event))
    let failure: unknown
    try {
      failure = await settle(context, groupById(batch), performance.now() + context.timeoutMs, { unconfirmed: false })
    } catch (err) {
      // A bug in the write must not leave a request waiting forever;
      // requests already answered ignore this.
      failure = err
      for (const p of batch) p.reject(err)
    }
    tell((o) => o.batchFinished?.(event, failure))
  }
}

// Orchestrators and balancers give a probe 1 s by default: the check ends
// before that, however long DB_TIMEOUT_MS is (it is set long to ride out a
// failover) and however the database hangs.
const READY_TIMEOUT_MS = 800

// Ready means a write can commit now. A standby or a read-only session
// raises the error a write would get (25006), so the pool drops that
// connection, as it drops every connection a statement failed on. Then a
// transactional WAL message takes a transaction id and writes WAL, so its
// commit waits for a synchronous standby as a create's does (txid_current()
// alone writes no WAL and commits at once); it needs no table and no
// privilege.
const probeSql =
  'DO $$ BEGIN IF pg_is_in_recovery() OR current_setting(\'transaction_read_only\')::boolean THEN ' +
  'RAISE EXCEPTION \'the database does not accept writes\' USING ERRCODE = \'read_only_sql_transaction\'; END IF; ' +
  'PERFORM pg_logical_emit_message(true, \'plant-store\', \'ready\'); END $$'

// A WAL segment: with less free than this, PostgreSQL cannot start the
// next one, and a full disk fails every commit (PGlite on disk only).
const MIN_FREE_BYTES = 16 * 1024 * 1024

async function probeCommit (db: Db): Promise<void> {
  await (db.probe === undefined ? db.exec(probeSql) : db.probe(probeSql))
  if (db.freeBytes !== undefined && await db.freeBytes() < MIN_FREE_BYTES) {
    throw new StoreUnavailableError('less than one WAL segment is free on the embedded database\'s disk')
  }
}

// Migrations applied and the probe committed within boundMs. One probe runs
// at a time: a probe asked for while one is in flight waits for that one
// (bounded as well), so a stalled commit holds one connection, never one
// per probe (Db.probe).
function readinessProbe (db: Db, boundMs: number, migrated: () => boolean, log?: Pick<FastifyBaseLogger, 'debug'>): () => Promise<boolean> {
  let inFlight: Promise<void> | undefined
  return async () => {
    if (!migrated()) return false
    inFlight ??= probeCommit(db).finally(() => { inFlight = undefined })
    try {
      await withDeadline(inFlight, boundMs, 'readiness check')
      return true
    } catch (err) {
      // Asked by every probe: at debug. An outage shows at warn where it
      // matters, in the creates it refuses and the migration retries.
      log?.debug({ err }, 'readiness check failed')
      return false
    }
  }
}

// ---- one batch's write ----

// Rows the database already holds come back from the second statement:
// under READ COMMITTED it sees rows committed after the INSERT began,
// which one statement (a CTE) could not.
export const insertBatchSql =
  'INSERT INTO plants (id, name, tag) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) ' +
  'ON CONFLICT (id) DO NOTHING RETURNING id'
// The stored rows of ids the INSERT did not write, one row per request
// (numbered by `i`, from 1), each with whether the request names exactly
// the stored plant. The database compares, byte for byte (collation "C"):
// PGlite drops a leading U+FEFF from text it returns, so text read back is
// never what a replay is compared with.
export const selectBatchSql =
  'SELECT r.i::int AS i, p.name, p.tag, ' +
  '(p.name IS NOT DISTINCT FROM r.name COLLATE "C" AND p.tag IS NOT DISTINCT FROM r.tag COLLATE "C") AS same ' +
  'FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS r(id, name, tag, i) ' +
  'JOIN plants p ON p.id = r.id'
// Prepared once per connection: parsing and planning the INSERT is a large
// share of the PostgreSQL server's work per batch (bench/RESULTS.md).
const insertStatement = { name: 'plants_insert_batch' }
const selectStatement = { name: 'plants_select_batch' }

// A row that neither the INSERT wrote nor the SELECT found was held by a
// transaction that rolled back in between: write it again, a bounded number
// of times.
const MAX_ATTEMPTS = 5

// Pauses between sends of a batch while the database is away (a failover
// moves the primary in seconds): doubling from the first, capped, with
// jitter so the replicas of the service do not retry in step.
const RETRY_FIRST_MS = 25
const RETRY_MAX_MS = 500

interface WriteContext {
  db: Db
  // DB_TIMEOUT_MS: how long a batch has from its take (Infinity: no bound).
  timeoutMs: number
  // What each create was told, for whoever watches the store.
  onAnswer: (kind: AnswerKind) => void
}

// The requests of one batch that name the same id. The first one's data is
// what the batch tries to store: first come, first served. Groups are
// found and matched by the bigint id itself: a Map keyed by its decimal
// text cost several times more per create (bench/RESULTS.md).
interface Group {
  id: bigint
  members: Pending[]
}

// Whether a write of these groups was sent and not confirmed: from then on
// their failure is "unknown" (504), whatever fails later, since the write
// may still commit.
interface Sent {
  unconfirmed: boolean
}

// Answers every request of groups; returns the error that failed them, if
// any, so writing rows one by one can stop when the database is gone.
//
// The deadline counts from the batch's take, not from its creates' expiry:
// a batch taken just before they expire would otherwise always fail. Once
// taken, a create is answered by what the database did with its row, never
// by a timer: no INSERT starts past the deadline, the SELECT (which writes
// nothing) is held to it, and the database bounds a write already sent
// (Db.writeBefore). Past it, a batch one of whose writes was not confirmed
// is answered 504, never 503.
async function settle (ctx: WriteContext, groups: Group[], deadline: number, sent: Sent): Promise<unknown> {
  let pending = groups
  let outageRetries = 0
  for (let attempt = 1; pending.length > 0; attempt++) {
    if (attempt > MAX_ATTEMPTS) return failAll(ctx, pending, new Error(`plant rows vanished ${MAX_ATTEMPTS} times between INSERT and SELECT`))
    if (performance.now() >= deadline) {
      return failAll(ctx, pending, sent.unconfirmed
        ? new OutcomeUnknownError(`a write of this row was not confirmed within ${ctx.timeoutMs} ms`)
        : new StoreUnavailableError(`writing the batch took longer than ${ctx.timeoutMs} ms; this row was not written`))
    }
    // The groups not answered yet, should a statement fail.
    let unanswered = pending
    try {
      unanswered = await insert(ctx, pending, deadline, sent)
      pending = unanswered.length === 0
        ? []
        : await withDeadline(answerExisting(ctx, unanswered), Math.max(0, deadline - performance.now()), 'reading the stored plants')
    } catch (err) {
      // Safe to send again: a row the failed statement did store is found
      // stored and answered as a replay. Not a vanished row, so the
      // attempt is not counted.
      if (isTransient(err) && await pauseBeforeRetry(outageRetries++, deadline)) {
        pending = unanswered
        attempt--
        continue
      }
      if (isUnavailable(err) || err instanceof OutcomeUnknownError || unanswered.length === 1) {
        return failAll(ctx, unanswered, failureAfter(err, sent))
      }
      // Something in this batch cannot be stored (or the statement failed
      // for a reason of its own): write each row alone, so only the row at
      // fault fails.
      return await oneByOne(ctx, unanswered, deadline, sent)
    }
  }
  return undefined
}

// Once a write was sent and not confirmed, every later failure is unknown.
function failureAfter (err: unknown, sent: Sent): unknown {
  if (!sent.unconfirmed) return asStoreError(err)
  return err instanceof OutcomeUnknownError ? err : new OutcomeUnknownError('a write of this row was not confirmed', { cause: err })
}

async function oneByOne (ctx: WriteContext, groups: Group[], deadline: number, sent: Sent): Promise<unknown> {
  for (let i = 0; i < groups.length; i++) {
    const failure = await settle(ctx, [groups[i] as Group], deadline, { ...sent })
    if (failure !== undefined && (isUnavailable(failure) || failure instanceof OutcomeUnknownError)) {
      return failAll(ctx, groups.slice(i + 1), failureAfter(failure, sent))
    }
  }
  return undefined
}

// Waits before retry number n (from 0) unless the wait would end past the
// deadline; true when it waited, so the batch may be sent again. A writer
// with no deadline has nothing to bound its retries: it sends once.
async function pauseBeforeRetry (n: number, deadline: number): Promise<boolean> {
  const ms = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** n) * (0.5 + Math.random() / 2)
  if (!Number.isFinite(deadline) || performance.now() + ms >= deadline) return false
  await new Promise((resolve) => setTimeout(resolve, ms))
  return true
}

// Writes the groups' rows in one statement, answers the ones it created
// and returns the groups whose id was already stored.
async function insert (ctx: WriteContext, groups: Group[], deadline: number, sent: Sent): Promise<Group[]> {
  const params = columns(groups.map((g) => first(g).plant))
  let rows: Array<{ id: unknown }>
  try {
    rows = await ctx.db.writeBefore<{ id: unknown }>(deadline, insertBatchSql, params, insertStatement)
  } catch (err) {
    if (err instanceof OutcomeUnknownError) sent.unconfirmed = true
    throw err
  }
  const created = new Set<bigint>()
  for (const row of rows) created.add(toId(row.id))
  const existing: Group[] = []
  for (const g of groups) {
    if (created.has(g.id)) answerCreated(g, ctx.onAnswer)
    else existing.push(g)
  }
  return existing
}

// A type, not an interface, so it is a Row (which has an index signature).
type Compared = { name: string, tag: string | null, same: boolean }

// Answers the groups whose row is stored; returns those whose row is gone.
async function answerExisting (ctx: WriteContext, groups: Group[]): Promise<Group[]> {
  const params = columns(groups.flatMap((g) => g.members.map((p) => p.plant)))
  const rows = await ctx.db.query<Compared & { i: number }>(selectBatchSql, params, selectStatement)
  const byRequest = new Map<number, Compared>()
  for (const row of rows) byRequest.set(Number(row.i), row)
  const missing: Group[] = []
  let n = 0
  for (const g of groups) {
    const at = n + 1
    n += g.members.length
    // Every request of a group names the same id: stored for all, or none.
    if (!byRequest.has(at)) missing.push(g)
    else answerCompared(g, (i) => byRequest.get(at + i) as Compared, ctx.onAnswer)
  }
  return missing
}

// The statements' parameters. Ids travel as decimal text cast to bigint[],
// so no driver ever sees a rounded number.
function columns (plants: PlantRecord[]): unknown[] {
  const ids: string[] = []
  const names: string[] = []
  const tags: Array<string | null> = []
  for (const p of plants) {
    ids.push(p.id.toString())
    names.push(p.name)
    tags.push(p.tag ?? null)
  }
  return [ids, names, tags]
}

// pg returns int8 as a string, PGlite as a number or a bigint.
function toId (value: unknown): bigint {
  if (typeof value === 'bigint') return value
  if (typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value))) return BigInt(value)
  throw new TypeError(`not an int8 value: ${typeof value}`)
}

function first (g: Group): Pending {
  return g.members[0] as Pending
}

// Groups a batch by id, in ascending id order: concurrent batches (here or
// in another instance) then take row locks in the same order and cannot
// deadlock on each other.
function groupById (batch: Pending[]): Group[] {
  const byId = new Map<bigint, Group>()
  for (const p of batch) {
    const id = p.plant.id
    const group = byId.get(id)
    if (group === undefined) byId.set(id, { id, members: [p] })
    else group.members.push(p)
  }
  const groups = [...byId.values()]
  if (groups.length > 1) groups.sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  return groups
}

function samePlant (a: PlantRecord, b: PlantRecord): boolean {
  return a.name === b.name && (a.tag ?? null) === (b.tag ?? null)
}

// The group's first request created the row; every other request of the
// same batch is compared with it (both are the requests' own strings).
function answerCreated (g: Group, onAnswer: WriteContext['onAnswer']): void {
  const stored = first(g).plant
  for (let i = 0; i < g.members.length; i++) {
    const p = g.members[i] as Pending
    const kind = i === 0 ? 'created' : samePlant(p.plant, stored) ? 'replayed' : 'conflict'
    onAnswer(kind)
    p.resolve({ kind, plant: kind === 'created' ? p.plant : stored })
  }
}

// Every request of a group whose row was already stored, as the database
// compared it: a replay is answered with the plant it sent (the same as the
// stored one, byte for byte); a conflict reports the stored plant.
function answerCompared (g: Group, row: (i: number) => Compared, onAnswer: WriteContext['onAnswer']): void {
  for (let i = 0; i < g.members.length; i++) {
    const p = g.members[i] as Pending
    const { name, tag, same } = row(i)
    const kind = same ? 'replayed' : 'conflict'
    onAnswer(kind)
    p.resolve({ kind, plant: same ? p.plant : tag === null ? { id: p.plant.id, name } : { id: p.plant.id, name, tag } })
  }
}

function failAll (ctx: WriteContext, groups: Group[], err: unknown): unknown {
  const unknown = err instanceof OutcomeUnknownError
  for (const g of groups) {
    for (const p of g.members) {
      if (unknown) ctx.onAnswer('unknown')
      p.reject(err)
    }
  }
  return err
}
