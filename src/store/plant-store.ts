import type { FastifyBaseLogger } from 'fastify'
import { type Db, toId } from './db.js'
import { asStoreError, isTransient, isUnavailable, StoreUnavailableError } from './errors.js'

// The plant store answers every create: created, replayed (the same plant
// was already stored), conflict (a different one was), or unavailable (a
// StoreUnavailableError, answered 503: not migrated yet, the database is
// down or too slow, too many creates waiting).

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

// Bounds a read as a whole: the readiness check, and the SELECT that
// answers creates whose id was already stored. The work is not cancelled,
// so this is only for statements that write nothing: a 503 from here is
// true. A write is never raced against a timer (see the batching writer).
async function withDeadline<T> (work: Promise<T>, ms: number, what: string): Promise<T> {
  if (!Number.isFinite(ms)) return await work
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`${what} took longer than ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([work, expired])
  } finally {
    clearTimeout(timer)
  }
}

// Every create is an INSERT that must reach the database before it is
// answered. One statement per request makes the database round trip the
// limit; gathering the creates that arrive while a write is in flight into
// one statement makes the machine the limit instead: the batching writer.

export interface BatchWriterOptions {
  // Rows written by one statement at most.
  maxBatch?: number
  // Creates waiting for a writer at most; past it create() refuses with
  // StoreUnavailableError (503), so a stalled database turns into quick
  // answers and bounded memory rather than a growing backlog.
  maxQueue?: number
  // Batches in flight at once. PGlite runs one query at a time (on its own
  // thread), so more than one only queues inside PGlite.
  concurrency?: number
  // Characters of names and tags written by one statement at most (a
  // batch holds at least one row): PGlite took ~17 s to write 240 MB of
  // names in one statement, and a batch must fit in its deadline.
  maxBatchBytes?: number
  // DB_TIMEOUT_MS. A create waiting in the queue this long is refused with
  // StoreUnavailableError (503): true, nothing was written. A batch has
  // this long from when it is taken; see writeBatch. Unset: no deadline.
  timeoutMs?: number
}

// Measured with `npm run bench` (bench/RESULTS.md). At 32 client
// connections batches hold 10-16 rows, so the batch bound only matters for
// bigger bursts. On PostgreSQL one writer and two gave the same throughput
// within noise and four less (smaller batches, more server CPU per row);
// two keep one slow statement (say, waiting on a row lock another instance
// holds) from stalling every create.
export const DEFAULT_MAX_BATCH = 256
export const DEFAULT_MAX_BATCH_BYTES = 4 * 1024 * 1024
export const DEFAULT_MAX_QUEUE = 10_000
export const DEFAULT_CONCURRENCY = { postgres: 2, pglite: 1 } as const

// Ids travel as decimal text cast to bigint[], so no driver ever sees a
// rounded number. Rows the database already holds come back from the
// second statement: under READ COMMITTED it sees rows committed after the
// INSERT began, which one statement (a CTE) could not.
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
// Prepared once per connection: parsing and planning the INSERT cost the
// PostgreSQL server about a third of its CPU per batch (bench/RESULTS.md).
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

// Waits before retry number n (from 0) unless the wait would end past the
// deadline; true when it waited, so the batch may be sent again. A writer
// with no deadline has nothing to bound its retries: it sends once.
async function pauseBeforeRetry (n: number, deadline: number): Promise<boolean> {
  const ms = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** n) * (0.5 + Math.random() / 2)
  if (!Number.isFinite(deadline) || performance.now() + ms >= deadline) return false
  await new Promise((resolve) => setTimeout(resolve, ms))
  return true
}

function samePlant (a: PlantRecord, b: { name: string, tag?: string | null }): boolean {
  return a.name === b.name && (a.tag ?? null) === (b.tag ?? null)
}

interface Pending {
  plant: PlantRecord
  // performance.now() past which it may no longer be sent.
  expiresAt: number
  resolve: (outcome: CreateOutcome) => void
  reject: (err: unknown) => void
}

// The requests of one batch that name the same id. The first one's data is
// what the batch tries to store: first come, first served.
interface Group {
  key: string
  members: Pending[]
}

export interface BatchWriter {
  create(plant: PlantRecord): Promise<CreateOutcome>
  observe(observer: StoreObserver): void
  stats(): WriterStats
}

export function createBatchWriter (db: Db, options: BatchWriterOptions = {}): BatchWriter {
  const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY[db.kind]
  const maxBatchBytes = options.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES
  const timeoutMs = options.timeoutMs ?? Infinity
  const queue: Pending[] = []
  let inFlight = 0
  let batches = 0
  const observers: StoreObserver[] = []
  // A watcher that throws must not change what a create is told, nor leave
  // a taken batch unanswered: its failure is dropped here.
  const tell = (call: (o: StoreObserver) => void): void => {
    for (const o of observers) {
      try {
        call(o)
      } catch {}
    }
  }
  const onAnswer = (kind: CreateOutcome['kind']): void => {
    if (observers.length > 0) tell((o) => o.answered?.(kind))
  }

  // The queue is FIFO and every create gets the same timeout, so the head
  // expires first: one timer, armed for the head's expiry, serves the queue.
  let expiryTimer: NodeJS.Timeout | undefined
  let expiryAt = Infinity
  const dropExpired = (): void => {
    const now = performance.now()
    let n = 0
    while (n < queue.length && (queue[n] as Pending).expiresAt <= now) n++
    if (n === 0) return
    const err = new StoreUnavailableError(`create waited ${timeoutMs} ms for the database; nothing was written`)
    for (const p of queue.splice(0, n)) p.reject(err)
  }
  const armExpiry = (): void => {
    const at = queue[0]?.expiresAt ?? Infinity
    if (expiryTimer !== undefined && at === expiryAt) return
    clearTimeout(expiryTimer)
    expiryTimer = undefined
    expiryAt = at
    if (!Number.isFinite(at)) return
    expiryTimer = setTimeout(() => {
      expiryTimer = undefined
      dropExpired()
      armExpiry()
    }, Math.max(0, at - performance.now()))
  }

  // Takes the next batch: live creates, up to maxBatch rows and
  // maxBatchBytes of names and tags (at least one row).
  const take = (): Pending[] => {
    dropExpired()
    let rows = 0
    let bytes = 0
    for (const p of queue) {
      bytes += p.plant.name.length + (p.plant.tag?.length ?? 0)
      if (rows === maxBatch || (rows > 0 && bytes > maxBatchBytes)) break
      rows++
    }
    const batch = queue.splice(0, rows)
    armExpiry()
    return batch
  }

  // No timer: a batch starts in the check phase of the event loop turn in
  // which its first create arrived, once the requests whose bytes were read
  // in that same turn have queued too; under load the batches form while
  // earlier ones are in flight. Starting at once, in the request's own
  // microtasks, would send the first create of every turn alone.
  let scheduled = false
  const schedule = (): void => {
    if (scheduled) return
    scheduled = true
    setImmediate(pump)
  }
  const pump = (): void => {
    scheduled = false
    while (inFlight < concurrency && queue.length > 0) {
      const batch = take()
      if (batch.length === 0) break
      inFlight++
      // writeBatch answers every request itself and never rejects.
      writeBatch(batch).finally(() => {
        inFlight--
        schedule()
      })
    }
  }

  // Once taken, a batch is no longer answered by a timer: each create's
  // answer is what the database did with its row, so a 503 is always true.
  // What bounds the write instead: on PostgreSQL the server cancels a
  // statement past statement_timeout (= DB_TIMEOUT_MS; 57014, nothing
  // stored: 503). PGlite cannot cancel a statement (WebAssembly has no
  // timer signal), so there each INSERT runs in a transaction that is
  // rolled back, and answered 503, when it ends past the batch's deadline;
  // the byte bound keeps that overrun short. The deadline counts from the
  // take, not from the creates' expiry: a batch taken just before its
  // creates expire would otherwise always be rolled back, and a busy queue
  // would write nothing at all. No INSERT (a retry, a row written alone)
  // starts past the deadline, and the SELECT answering stored ids, which
  // writes nothing, is held to it. A batch that failed because the
  // database is away (isTransient) is sent again after a pause, as long as
  // the pause ends before the deadline: a failover the deadline covers
  // shows callers no error.
  const writeBatch = async (batch: Pending[]): Promise<void> => {
    const event: WriteBatch = { id: ++batches, creates: batch }
    tell((o) => o.batchStarted?.(event))
    let failure: unknown
    try {
      failure = await settle(groupById(batch), performance.now() + timeoutMs)
    } catch (err) {
      // A bug in the code above must not leave a request waiting forever;
      // requests already answered ignore this.
      failure = err
      for (const p of batch) p.reject(err)
    }
    tell((o) => o.batchFinished?.(event, failure))
  }

  // Answers every request of groups; returns the error that failed them, if
  // any, so writing rows one by one can stop when the database is gone.
  const settle = async (groups: Group[], deadline: number): Promise<unknown> => {
    let pending = groups
    let outageRetries = 0
    for (let attempt = 1; pending.length > 0; attempt++) {
      if (attempt > MAX_ATTEMPTS) {
        const err = new Error(`plant rows vanished ${MAX_ATTEMPTS} times between INSERT and SELECT`)
        failAll(pending, err)
        return err
      }
      if (performance.now() >= deadline) {
        const err = new StoreUnavailableError(`writing the batch took longer than ${timeoutMs} ms; this row was not written`)
        failAll(pending, err)
        return err
      }
      // The groups not answered yet, should a statement fail.
      let unanswered = pending
      try {
        unanswered = await insert(pending, deadline)
        pending = unanswered.length === 0
          ? []
          : await withDeadline(answerExisting(unanswered), Math.max(0, deadline - performance.now()), 'reading the stored plants')
      } catch (err) {
        // Safe to send again: a row the failed statement did store is found
        // stored and answered as a replay. Not a vanished row, so the
        // attempt is not counted.
        if (isTransient(err) && await pauseBeforeRetry(outageRetries++, deadline)) {
          pending = unanswered
          attempt--
          continue
        }
        if (isUnavailable(err) || unanswered.length === 1) {
          const failure = asStoreError(err)
          failAll(unanswered, failure)
          return failure
        }
        // Something in this batch cannot be stored (or the statement failed
        // for a reason of its own): write each row alone, so only the row at
        // fault fails.
        return await oneByOne(unanswered, deadline)
      }
    }
    return undefined
  }

  const oneByOne = async (groups: Group[], deadline: number): Promise<unknown> => {
    for (let i = 0; i < groups.length; i++) {
      const failure = await settle([groups[i] as Group], deadline)
      if (failure !== undefined && isUnavailable(failure)) {
        failAll(groups.slice(i + 1), failure)
        return failure
      }
    }
    return undefined
  }

  // Writes the groups' rows in one statement, answers the ones it created
  // and returns the groups whose id was already stored.
  const insert = async (groups: Group[], deadline: number): Promise<Group[]> => {
    const ids: string[] = []
    const names: string[] = []
    const tags: Array<string | null> = []
    for (const g of groups) {
      const plant = first(g).plant
      ids.push(g.key)
      names.push(plant.name)
      tags.push(plant.tag ?? null)
    }
    const params = [ids, names, tags]
    const rows = db.kind === 'postgres'
      ? await db.query<{ id: unknown }>(insertBatchSql, params, insertStatement)
      : await db.transaction(async (tx) => {
        const written = await tx.query<{ id: unknown }>(insertBatchSql, params, insertStatement)
        if (performance.now() > deadline) {
          throw new StoreUnavailableError(`writing the batch took longer than ${timeoutMs} ms; rolled back`)
        }
        return written
      })
    // pg returns int8 as decimal text already: only PGlite's numbers go
    // through toId.
    const created = new Set<string>()
    for (const row of rows) created.add(typeof row.id === 'string' ? row.id : toId(row.id).toString())
    const existing: Group[] = []
    for (const g of groups) {
      if (created.has(g.key)) answer(g, first(g).plant, true, onAnswer)
      else existing.push(g)
    }
    return existing
  }

  // Answers the groups whose row is stored; returns those whose row is gone.
  const answerExisting = async (groups: Group[]): Promise<Group[]> => {
    const ids: string[] = []
    const names: string[] = []
    const tags: Array<string | null> = []
    for (const g of groups) {
      for (const p of g.members) {
        ids.push(g.key)
        names.push(p.plant.name)
        tags.push(p.plant.tag ?? null)
      }
    }
    const rows = await db.query<{ i: number, name: string, tag: string | null, same: boolean }>(
      selectBatchSql, [ids, names, tags], selectStatement)
    const byRequest = new Map<number, { name: string, tag: string | null, same: boolean }>()
    for (const row of rows) byRequest.set(Number(row.i), row)
    const missing: Group[] = []
    let n = 0
    for (const g of groups) {
      const first = n + 1
      n += g.members.length
      // Every request of a group names the same id: stored for all, or none.
      if (!byRequest.has(first)) missing.push(g)
      else answerCompared(g, (i) => byRequest.get(first + i) as { name: string, tag: string | null, same: boolean }, onAnswer)
    }
    return missing
  }

  return {
    create (plant) {
      if (queue.length >= maxQueue) {
        tell((o) => o.rejectedFull?.())
        return Promise.reject(new StoreUnavailableError(`${queue.length} creates are already waiting for the database`))
      }
      if (observers.length > 0) tell((o) => o.queued?.(plant))
      return new Promise<CreateOutcome>((resolve, reject) => {
        queue.push({ plant, expiresAt: performance.now() + timeoutMs, resolve, reject })
        if (queue.length === 1) armExpiry()
        if (inFlight < concurrency) schedule()
      })
    },
    observe (observer) {
      observers.push(observer)
    },
    stats: () => ({ queueDepth: queue.length, inFlight })
  }
}

function first (g: Group): Pending {
  return g.members[0] as Pending
}

// Groups a batch by id, in ascending id order: concurrent batches (here or
// in another instance) then take row locks in the same order and cannot
// deadlock on each other.
function groupById (batch: Pending[]): Group[] {
  const byKey = new Map<string, Group>()
  for (const p of batch) {
    const key = p.plant.id.toString()
    const group = byKey.get(key)
    if (group === undefined) byKey.set(key, { key, members: [p] })
    else group.members.push(p)
  }
  const groups = [...byKey.values()]
  if (groups.length > 1) {
    groups.sort((a, b) => {
      const x = first(a).plant.id
      const y = first(b).plant.id
      return x < y ? -1 : x > y ? 1 : 0
    })
  }
  return groups
}

// The first request of a group that created the row gets "created"; every
// other request compares its data with the stored row.
function answer (g: Group, stored: PlantRecord, created: boolean, onAnswer: (kind: CreateOutcome['kind']) => void): void {
  for (let i = 0; i < g.members.length; i++) {
    const p = g.members[i] as Pending
    const kind = created && i === 0 ? 'created' : samePlant(p.plant, stored) ? 'replayed' : 'conflict'
    onAnswer(kind)
    p.resolve({ kind, plant: kind === 'created' ? p.plant : stored })
  }
}

// Every request of a group whose row was already stored, as the database
// compared it: a replay is answered with the plant it sent (the same as the
// stored one, byte for byte); a conflict reports the stored plant.
function answerCompared (g: Group, row: (i: number) => { name: string, tag: string | null, same: boolean }, onAnswer: (kind: CreateOutcome['kind']) => void): void {
  for (let i = 0; i < g.members.length; i++) {
    const p = g.members[i] as Pending
    const { name, tag, same } = row(i)
    const kind = same ? 'replayed' : 'conflict'
    onAnswer(kind)
    p.resolve({ kind, plant: same ? p.plant : tag === null ? { id: p.plant.id, name } : { id: p.plant.id, name, tag } })
  }
}

function failAll (groups: Group[], err: unknown): void {
  for (const g of groups) for (const p of g.members) p.reject(err)
}
