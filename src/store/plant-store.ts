import type { BaseLogger } from 'pino'
import type { Db } from './db.js'
import { readinessProbe, READY_TIMEOUT_MS } from './readiness.js'
import { asStoreError, isTransient, isUnavailable, OutcomeUnknownError, StoreUnavailableError, withDeadline } from './store-errors.js'

// The plant store: a create is answered once the database has its row. Creates that arrive while a write is in
// flight wait in a queue and share the next statement. This file follows a create from top to bottom: create()
// puts it in the queue, the queue takes a batch, writeBatch writes it (docs/architecture.md, "The write queue").

export interface PlantRecord { id: bigint, name: string, tag?: string }

export interface CreateOutcome { kind: 'created' | 'replayed' | 'conflict', plant: PlantRecord }

// What a create was told: an outcome, or "unknown" (504).
export type AnswerKind = CreateOutcome['kind'] | 'unknown'

export interface WriterOptions {
  maxBatch?: number // rows in one statement
  maxBatchChars?: number // characters of names and tags in one statement (a batch holds at least one create)
  maxQueue?: number // creates waiting; past it a create is refused (503), so a stalled database gives quick answers, not a backlog
  concurrency?: number // batches in flight at once; the database's own number (Db.writers) unless set
}

export interface PlantStoreOptions {
  timeoutMs?: number // how long a create may wait in the queue, then how long its batch may take; unset: no bound
  migrated?: boolean // until markMigrated, creates are refused and the store is not ready
  log?: Pick<BaseLogger, 'debug'>
  writer?: WriterOptions
}

// The row bound matters only for bursts (bench/RESULTS.md).
const WRITER_DEFAULTS = { maxBatch: 256, maxBatchChars: 4 * 1024 * 1024, maxQueue: 10_000 }

// Told synchronously on the create path, so a watcher must be cheap.
export interface StoreObserver {
  queued?(plant: PlantRecord): void // in the caller's async context
  rejectedFull?(): void
  batchStarted?(batch: WriteBatch): void
  batchFinished?(batch: WriteBatch, failure: unknown): void
  answered?(kind: AnswerKind): void
}

export interface WriteBatch { readonly id: number, readonly creates: ReadonlyArray<{ readonly item: PlantRecord }> }

export interface WriterStats { queueDepth: number, inFlight: number }

// A create waiting for its answer.
interface Create {
  item: PlantRecord
  expiresAt: number // performance.now() past which it may no longer be sent
  resolve: (outcome: CreateOutcome) => void
  reject: (err: unknown) => void
}

export function createPlantStore (db: Db, { timeoutMs = Infinity, migrated = true, log, writer = {} }: PlantStoreOptions = {}) {
  let isMigrated = migrated
  const observers: StoreObserver[] = []
  // A watcher that throws must neither change an answer nor leave a batch unanswered.
  const notifyObservers = (call: (o: StoreObserver) => void): void => {
    for (const o of observers) {
      try {
        call(o)
      } catch {}
    }
  }
  const context: WriteContext = { db, timeoutMs, onAnswer: (kind) => { if (observers.length > 0) notifyObservers((o) => o.answered?.(kind)) } }
  const queue = createWriteQueue({ ...WRITER_DEFAULTS, concurrency: db.writers, ...writer }, timeoutMs, watchedWriter(context, notifyObservers))
  return {
    observe: (observer: StoreObserver): void => { observers.push(observer) },
    stats: queue.stats,
    isMigrated: (): boolean => isMigrated,
    markMigrated: (): void => { isMigrated = true },
    // Resolves once the row is committed. Not async: a create costs one promise, the queue's.
    create (plant: PlantRecord): Promise<CreateOutcome> {
      if (!isMigrated) return Promise.reject(new StoreUnavailableError('The database is not ready yet'))
      if (queue.full()) notifyObservers((o) => o.rejectedFull?.())
      else if (observers.length > 0) notifyObservers((o) => o.queued?.(plant))
      return queue.enqueue(plant)
    },
    isReady: readinessProbe(db, Math.min(timeoutMs, READY_TIMEOUT_MS), () => isMigrated, log)
  }
}

export type PlantStore = ReturnType<typeof createPlantStore>

// Writes each batch the queue takes, telling the observers when it starts and ends.
function watchedWriter (context: WriteContext, notifyObservers: (call: (o: StoreObserver) => void) => void): (batch: Create[]) => Promise<void> {
  let batches = 0
  return async (batch) => {
    const event: WriteBatch = { id: ++batches, creates: batch }
    notifyObservers((o) => o.batchStarted?.(event))
    const failure = await writeBatch(context, groupById(batch), performance.now() + context.timeoutMs, { unconfirmed: false })
      .catch((err: unknown) => {
        // A bug must not leave a request waiting forever (the creates already answered ignore this).
        for (const p of batch) p.reject(err)
        return err
      })
    notifyObservers((o) => o.batchFinished?.(event, failure))
  }
}

// The queue: first in, first out. A batch starts in the check phase of the turn in which its first create arrived
// (setImmediate), so the creates of one turn share it; in the request's own microtasks it would go alone.
// `write` answers every create of its batch itself and never rejects.
function createWriteQueue (options: Required<WriterOptions>, timeoutMs: number, write: (batch: Create[]) => Promise<void>) {
  const { maxBatch, maxBatchChars, maxQueue, concurrency } = options
  const queue: Create[] = []
  let inFlight = 0
  const expiry = expiryTimer(queue, timeoutMs)

  let scheduled = false
  const schedule = (): void => {
    if (scheduled) return
    scheduled = true
    setImmediate(pump)
  }
  const pump = (): void => {
    scheduled = false
    while (inFlight < concurrency && queue.length > 0) {
      expiry.dropExpired()
      const batch = queue.splice(0, batchLength(queue, maxBatch, maxBatchChars))
      expiry.arm()
      if (batch.length === 0) break
      inFlight++
      write(batch).finally(() => {
        inFlight--
        schedule()
      })
    }
  }

  const full = (): boolean => queue.length >= maxQueue
  return {
    full,
    enqueue (item: PlantRecord): Promise<CreateOutcome> {
      if (full()) return Promise.reject(new StoreUnavailableError(`${queue.length} creates are already waiting for the database`))
      return new Promise<CreateOutcome>((resolve, reject) => {
        queue.push({ item, expiresAt: performance.now() + timeoutMs, resolve, reject })
        if (queue.length === 1) expiry.arm()
        if (inFlight < concurrency) schedule()
      })
    },
    stats: (): WriterStats => ({ queueDepth: queue.length, inFlight })
  }
}

// How many creates from the head of the queue make the next batch: at most maxBatch, and no more characters of
// names and tags than maxBatchChars, unless the first alone has more.
function batchLength (queue: readonly Create[], maxBatch: number, maxBatchChars: number): number {
  let rows = 0
  let chars = 0
  for (const { item } of queue) {
    chars += item.name.length + (item.tag?.length ?? 0)
    if (rows === maxBatch || (rows > 0 && chars > maxBatchChars)) break
    rows++
  }
  return rows
}

// Every create waits the same time at most, and the queue is first in, first out, so the head always expires
// first. One timer, armed for the head's expiry, serves the whole queue. When the head is taken meanwhile, the
// timer fires early and is armed again for the new head.
function expiryTimer (queue: Create[], timeoutMs: number): { dropExpired: () => void, arm: () => void } {
  let timer: NodeJS.Timeout | undefined
  const dropExpired = (): void => {
    const now = performance.now()
    let n = 0
    while (n < queue.length && (queue[n] as Create).expiresAt <= now) n++
    if (n === 0) return
    const err = new StoreUnavailableError(`create waited ${timeoutMs} ms for the database; nothing was written`)
    for (const p of queue.splice(0, n)) p.reject(err)
  }
  const arm = (): void => {
    const head = queue[0]
    if (head === undefined) {
      clearTimeout(timer)
      timer = undefined
    } else if (timer === undefined && Number.isFinite(timeoutMs)) {
      timer = setTimeout(() => {
        timer = undefined
        dropExpired()
        arm()
      }, Math.max(0, head.expiresAt - performance.now()))
    }
  }
  return { dropExpired, arm }
}

// The rows come back from a second statement, which sees rows committed after the INSERT began.
export const insertBatchSql =
  'INSERT INTO plants (id, name, tag) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) ' +
  'ON CONFLICT (id) DO NOTHING RETURNING id'
// One row per request (`i`, from 1). The database compares, in collation "C", because PGlite drops a leading
// U+FEFF from the text it returns.
export const selectBatchSql =
  'SELECT r.i::int AS i, p.name, p.tag, ' +
  '(p.name IS NOT DISTINCT FROM r.name COLLATE "C" AND p.tag IS NOT DISTINCT FROM r.tag COLLATE "C") AS same ' +
  'FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS r(id, name, tag, i) ' +
  'JOIN plants p ON p.id = r.id'
// Prepared once per connection: planning is a large share of the server's work (bench/RESULTS.md).
const insertStatement = { name: 'plants_insert_batch' }
const selectStatement = { name: 'plants_select_batch' }

// A row that is neither inserted nor found was held by a transaction that rolled back in between; after this many
// rounds the batch gives up.
const MAX_ROUNDS = 5

// The pause before a batch is sent again to a database that was away: doubling from the first, jittered so that
// replicas do not retry in step.
const RETRY_FIRST_MS = 25
const RETRY_MAX_MS = 500

interface WriteContext { db: Db, timeoutMs: number, onAnswer: (kind: AnswerKind) => void }

// The creates of a batch that name one id. The first one's plant is stored; the others are compared with it.
// Grouped by the bigint, since text cost more (bench/RESULTS.md).
interface Group { id: bigint, members: Create[] }

// Whether a write of these rows was sent and not confirmed. Such a write may still commit, so every later failure
// of its rows is "unknown" (504), never 503.
interface Sent { unconfirmed: boolean }

// One batch: its rows in one INSERT, then the ids the INSERT did not store read back and compared. Both go again
// while rows vanish in between (at most MAX_ROUNDS rounds) or while the database is away (after a pause, as long as
// the pause ends before the deadline). Nothing is sent past the deadline. When the batch fails for a reason of its
// own, its rows are written one by one (writeRowByRow). Returns the error that failed the batch, if one did.
async function writeBatch (ctx: WriteContext, groups: Group[], deadline: number, sent: Sent): Promise<unknown> {
  let pending = groups
  let rounds = 0
  let pauses = 0
  while (pending.length > 0) {
    if (rounds === MAX_ROUNDS) return failAll(ctx, pending, new Error(`rows vanished ${MAX_ROUNDS} times between INSERT and SELECT`))
    if (performance.now() >= deadline) {
      return failAll(ctx, pending, failureAfter(new StoreUnavailableError(`writing the batch took longer than ${ctx.timeoutMs} ms`), sent))
    }
    let unanswered = pending
    try {
      unanswered = await insert(ctx, pending, deadline)
      pending = unanswered.length === 0
        ? []
        : await withDeadline(answerExisting(ctx, unanswered), Math.max(0, deadline - performance.now()), 'reading the stored plants')
      rounds++
    } catch (err) {
      // Only a write's outcome can be unknown: the SELECT only reads.
      if (err instanceof OutcomeUnknownError) sent.unconfirmed = true
      // Safe to send again: a row that the failed statement stored is then a replay.
      if (isTransient(err) && await pauseBeforeRetry(pauses++, deadline)) {
        pending = unanswered
        continue
      }
      if (isUnavailable(err) || err instanceof OutcomeUnknownError || unanswered.length === 1) {
        return failAll(ctx, unanswered, failureAfter(err, sent))
      }
      return await writeRowByRow(ctx, unanswered, deadline, sent)
    }
  }
  return undefined
}

// Each row alone (a batch of one, which writeBatch never splits further), so that only the row at fault fails.
// When the database goes away meanwhile, the rows not yet written fail with it.
async function writeRowByRow (ctx: WriteContext, groups: Group[], deadline: number, sent: Sent): Promise<unknown> {
  for (const [i, group] of groups.entries()) {
    const failure = await writeBatch(ctx, [group], deadline, { ...sent })
    if (isUnavailable(failure) || failure instanceof OutcomeUnknownError) {
      return failAll(ctx, groups.slice(i + 1), failureAfter(failure, sent))
    }
  }
  return undefined
}

function failureAfter (err: unknown, sent: Sent): unknown {
  if (!sent.unconfirmed) return asStoreError(err)
  return err instanceof OutcomeUnknownError ? err : new OutcomeUnknownError('a write of this row was not confirmed', { cause: err })
}

// True when it waited. It does not wait past the deadline, nor without one, since nothing would then bound the retries.
async function pauseBeforeRetry (n: number, deadline: number): Promise<boolean> {
  const ms = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** n) * (0.5 + Math.random() / 2)
  if (!Number.isFinite(deadline) || performance.now() + ms >= deadline) return false
  await new Promise((resolve) => setTimeout(resolve, ms))
  return true
}

// Inserts the first plant of each group and answers the groups it stored. Returns the groups whose id was
// already stored.
async function insert (ctx: WriteContext, groups: Group[], deadline: number): Promise<Group[]> {
  const plants = columns(groups.map((g) => (g.members[0] as Create).item))
  const rows = await ctx.db.writeBefore<{ id: unknown }>(deadline, insertBatchSql, plants, insertStatement)
  const created = new Set(rows.map((row) => toId(row.id)))
  for (const g of groups) {
    if (!created.has(g.id)) continue
    // The others of the group are compared with the first, both the requests' own strings.
    const first = (g.members[0] as Create).item
    g.members.forEach((p, i) => {
      const same = p.item.name === first.name && p.item.tag === first.tag
      answer(p, i === 0 ? 'created' : same ? 'replayed' : 'conflict', first, ctx)
    })
  }
  return groups.filter((g) => !created.has(g.id))
}

// A type, not an interface, so that it is a Row (which has an index signature).
type Compared = { name: string, tag: string | null, same: boolean }

// Answers each create with the row stored under its id. Returns the groups whose row is gone.
async function answerExisting (ctx: WriteContext, groups: Group[]): Promise<Group[]> {
  const params = columns(groups.flatMap((g) => g.members.map((p) => p.item)))
  const rows = await ctx.db.query<Compared & { i: number }>(selectBatchSql, params, selectStatement)
  const byRequest = new Map<number, Compared>(rows.map((row) => [Number(row.i), row]))
  const missing: Group[] = []
  let n = 0
  for (const g of groups) {
    const at = n + 1
    n += g.members.length
    // The creates of a group name one id: its row is there for all of them, or for none.
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

// Ids travel as decimal text cast to bigint[], so that no driver sees a rounded number.
function columns (plants: PlantRecord[]): unknown[] {
  return [plants.map((p) => p.id.toString()), plants.map((p) => p.name), plants.map((p) => p.tag ?? null)]
}

// pg returns int8 as a string, PGlite as a number or a bigint.
function toId (value: unknown): bigint {
  if (typeof value === 'bigint') return value
  if (typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value))) return BigInt(value)
  throw new TypeError(`not an int8 value: ${typeof value}`)
}

// In ascending id order, so that concurrent batches (here or in another instance) take row locks in one order and
// cannot deadlock.
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
