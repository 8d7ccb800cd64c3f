import { type Db, toId } from './db.js'
import { asStoreError, isTransient, isUnavailable, StoreUnavailableError, withDeadline } from './unavailable.js'
import type { CreateOutcome, PlantRecord } from './plant-record.js'
import type { Pending } from './write-queue.js'

// One batch's write: every create of the batch in one INSERT, the ids that
// were already stored compared with what they hold, and each create
// answered with what the database did with its row. The queue
// (write-queue.ts) decides when a batch goes; this decides what it is told.

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

export interface BatchWriteContext {
  db: Db
  // DB_TIMEOUT_MS: how long a batch has from its take (Infinity: no bound).
  timeoutMs: number
  // What each create was told, for whoever watches the store.
  onAnswer: (kind: CreateOutcome['kind']) => void
}

// The requests of one batch that name the same id. The first one's data is
// what the batch tries to store: first come, first served. Groups are
// found and matched by the bigint id itself: a Map keyed by its decimal
// text cost several times more per create (bench/RESULTS.md).
interface Group {
  id: bigint
  members: Pending[]
}

// Writes a batch and answers every create in it; resolves with the error
// that failed some of them, if any, and never rejects for a database error.
//
// Once taken, a batch is no longer answered by a timer: each create's
// answer is what the database did with its row, so a 503 is always true.
// The deadline counts from the take: no INSERT (a retry, a row written
// alone) starts past it, the SELECT answering stored ids, which writes
// nothing, is held to it, and the database bounds a write already sent
// (Db.writeBefore). A batch taken just before its creates expire would
// otherwise always fail, and a busy queue would write nothing at all. A
// batch that failed because the database is away (isTransient) is sent
// again after a pause, as long as the pause ends before the deadline: a
// failover the deadline covers shows callers no error.
export async function writeBatch (ctx: BatchWriteContext, batch: Pending[]): Promise<unknown> {
  return await settle(ctx, groupById(batch), performance.now() + ctx.timeoutMs)
}

// Answers every request of groups; returns the error that failed them, if
// any, so writing rows one by one can stop when the database is gone.
async function settle (ctx: BatchWriteContext, groups: Group[], deadline: number): Promise<unknown> {
  let pending = groups
  let outageRetries = 0
  for (let attempt = 1; pending.length > 0; attempt++) {
    if (attempt > MAX_ATTEMPTS) return failAll(pending, new Error(`plant rows vanished ${MAX_ATTEMPTS} times between INSERT and SELECT`))
    if (performance.now() >= deadline) {
      return failAll(pending, new StoreUnavailableError(`writing the batch took longer than ${ctx.timeoutMs} ms; this row was not written`))
    }
    // The groups not answered yet, should a statement fail.
    let unanswered = pending
    try {
      unanswered = await insert(ctx, pending, deadline)
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
      if (isUnavailable(err) || unanswered.length === 1) return failAll(unanswered, asStoreError(err))
      // Something in this batch cannot be stored (or the statement failed
      // for a reason of its own): write each row alone, so only the row at
      // fault fails.
      return await oneByOne(ctx, unanswered, deadline)
    }
  }
  return undefined
}

async function oneByOne (ctx: BatchWriteContext, groups: Group[], deadline: number): Promise<unknown> {
  for (let i = 0; i < groups.length; i++) {
    const failure = await settle(ctx, [groups[i] as Group], deadline)
    if (failure !== undefined && isUnavailable(failure)) return failAll(groups.slice(i + 1), failure)
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
async function insert (ctx: BatchWriteContext, groups: Group[], deadline: number): Promise<Group[]> {
  const ids: string[] = []
  const names: string[] = []
  const tags: Array<string | null> = []
  for (const g of groups) {
    const plant = first(g).plant
    ids.push(g.id.toString())
    names.push(plant.name)
    tags.push(plant.tag ?? null)
  }
  const rows = await ctx.db.writeBefore<{ id: unknown }>(deadline, insertBatchSql, [ids, names, tags], insertStatement)
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
async function answerExisting (ctx: BatchWriteContext, groups: Group[]): Promise<Group[]> {
  const ids: string[] = []
  const names: string[] = []
  const tags: Array<string | null> = []
  for (const g of groups) {
    const id = g.id.toString()
    for (const p of g.members) {
      ids.push(id)
      names.push(p.plant.name)
      tags.push(p.plant.tag ?? null)
    }
  }
  const rows = await ctx.db.query<Compared & { i: number }>(selectBatchSql, [ids, names, tags], selectStatement)
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
function answerCreated (g: Group, onAnswer: BatchWriteContext['onAnswer']): void {
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
function answerCompared (g: Group, row: (i: number) => Compared, onAnswer: BatchWriteContext['onAnswer']): void {
  for (let i = 0; i < g.members.length; i++) {
    const p = g.members[i] as Pending
    const { name, tag, same } = row(i)
    const kind = same ? 'replayed' : 'conflict'
    onAnswer(kind)
    p.resolve({ kind, plant: same ? p.plant : tag === null ? { id: p.plant.id, name } : { id: p.plant.id, name, tag } })
  }
}

// Fails every request of groups with err, and returns err.
function failAll (groups: Group[], err: unknown): unknown {
  for (const g of groups) for (const p of g.members) p.reject(err)
  return err
}
