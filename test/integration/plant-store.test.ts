import t from 'tap'
import { pino } from 'pino'
import { setImmediate as tick, setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from '../../app.js'
import type { Db, QueryOptions, Row, Sql } from '../../src/store/db.js'
import { openPglite } from '../../src/store/pglite/index.js'
import { openPostgres } from '../../src/store/postgres.js'
import { migrate } from '../../src/store/migrations.js'
import { OutcomeUnknownError, StoreUnavailableError } from '../../src/store/store-errors.js'
import { createPlantStore, insertBatchSql, type CreateOutcome, type PlantRecord, type WriterOptions } from '../../src/store/plant-store.js'
import { assertErrorShape, createTestDatabase, forEachBackend, postPlant, testConfig, type BackendName } from '../helper.js'

// A Db whose batch INSERTs are recorded and can be held back or made to fail.
interface ControlledDb extends Db {
  // The ids of every batch INSERT, in the order they were issued.
  inserts: string[][]
  // The statement name each batch INSERT was prepared under, if any.
  names: Array<string | undefined>
  // Batch INSERTs that have returned from the database.
  returned: number
  // Holds every batch INSERT issued from now until the returned function runs.
  hold(): () => void
  // Decides, per batch INSERT, whether it fails instead of reaching the database.
  failWith: ((ids: string[]) => Error | undefined) | undefined
  // Decides, per batch INSERT that reached the database, whether its reply is lost.
  loseReplyWith: ((ids: string[]) => Error | undefined) | undefined
}

function controlled (db: Db): ControlledDb {
  let gate: Promise<void> | undefined
  // run sends the statement on: the target's query, or the Db's own write.
  const intercept = async <R extends Row> (run: (text: string, params?: unknown[], options?: QueryOptions) => Promise<R[]>, text: string, params?: unknown[], options?: QueryOptions): Promise<R[]> => {
    if (text !== insertBatchSql) return await run(text, params, options)
    const ids = (params?.[0] ?? []) as string[]
    c.inserts.push(ids)
    c.names.push(options?.name)
    if (gate !== undefined) await gate
    const failure = c.failWith?.(ids)
    if (failure !== undefined) throw failure
    const rows = await run(text, params, options)
    c.returned++
    const lost = c.loseReplyWith?.(ids)
    if (lost !== undefined) throw lost
    return rows
  }
  const via = <R extends Row>(target: Sql) => async (text: string, params?: unknown[], options?: QueryOptions) => await target.query<R>(text, params, options)
  const c: ControlledDb = {
    kind: db.kind,
    inserts: [],
    names: [],
    returned: 0,
    failWith: undefined,
    loseReplyWith: undefined,
    hold () {
      let open!: () => void
      gate = new Promise((resolve) => { open = resolve })
      return () => { gate = undefined; open() }
    },
    writers: db.writers,
    query: async <R extends Row = Row> (text: string, params?: unknown[], options?: QueryOptions) =>
      await intercept<R>(via<R>(db), text, params, options),
    // The Db's own bound on the write (PGlite's rollback past the deadline)
    // applies to the statement once the gate lets it through.
    writeBefore: async <R extends Row = Row> (deadline: number, text: string, params?: unknown[], options?: QueryOptions) =>
      await intercept<R>(async (t, p, o) => await db.writeBefore<R>(deadline, t, p, o), text, params, options),
    exec: async (text) => await db.exec(text),
    // Statements inside a transaction are recorded and held the same way.
    transaction: async (fn) => await db.transaction(async (tx) => await fn({
      query: async <R extends Row = Row> (text: string, params?: unknown[], options?: QueryOptions) =>
        await intercept<R>(via<R>(tx), text, params, options),
      exec: async (text) => await tx.exec(text)
    })),
    close: async () => await db.close()
  }
  return c
}

async function openDb (t: { teardown(fn: () => unknown): void }, backend: BackendName): Promise<Db> {
  const testDb = await createTestDatabase(backend)
  const db = testDb.database.kind === 'postgres'
    ? openPostgres({ url: testDb.database.url, timeoutMs: 5000, log: pino({ level: 'silent' }) })
    : await openPglite(testDb.database.dataDir)
  t.teardown(async () => {
    await db.close()
    await testDb.drop()
  })
  await migrate(db)
  return db
}

// A few turns of the event loop: a batch starts in the turn its first
// create arrived in, and no timer is involved anywhere.
async function turns (): Promise<void> {
  for (let i = 0; i < 3; i++) await tick()
}

async function storedRows (db: Db, from: bigint, to: bigint): Promise<Array<{ id: string, name: string, tag: string | null }>> {
  return await db.query<{ id: string, name: string, tag: string | null }>(
    'SELECT id::text AS id, name, tag FROM plants WHERE id BETWEEN $1::bigint AND $2::bigint ORDER BY id',
    [from.toString(), to.toString()])
}

const plant = (id: bigint, name: string, tag?: string): PlantRecord =>
  tag === undefined ? { id, name } : { id, name, tag }

// Settles every promise, keeping rejections as values.
async function outcomes (creates: Array<Promise<CreateOutcome>>): Promise<Array<CreateOutcome | Error>> {
  return await Promise.all(creates.map(async (p) => await p.catch((err: Error) => err)))
}

forEachBackend(t, 'the batching writer', async (t, backend) => {
  const base = await openDb(t, backend)

  t.test('an idle writer writes the first create at once; those arriving meanwhile share one statement', async (t) => {
    const db = controlled(base)
    const writer = createPlantStore(db, { writer: { concurrency: 1 } })
    await writer.create(plant(13n, 'Stored', 'x'))
    const release = db.hold()
    const firstCreate = writer.create(plant(1n, 'Alone'))
    await turns()
    // On PGlite the INSERT follows a BEGIN, a round trip to its thread.
    if (backend === 'pglite') for (let waited = 0; db.inserts.length < 2 && waited < 2000; waited += 5) await sleep(5)
    t.same(db.inserts.at(-1), ['1'], 'the first create is written without waiting for a timer or company')
    const big = 9223372036854775807n
    const negative = -9007199254740993n
    const batch = [
      writer.create(plant(11n, 'Same', 'a')),
      writer.create(plant(10n, 'Twin')),
      writer.create(plant(10n, 'Twin')),
      writer.create(plant(11n, 'Same', 'b')),
      writer.create(plant(13n, 'Stored', 'x')),
      writer.create(plant(13n, 'Stored')),
      writer.create(plant(big, 'Max')),
      writer.create(plant(big, 'Max')),
      writer.create(plant(negative, 'Neg')),
      writer.create(plant(negative, 'Other'))
    ]
    await turns()
    t.equal(db.inserts.length, 2, 'nothing else is written while the first write is in flight')
    release()
    t.same(await firstCreate, { kind: 'created', plant: plant(1n, 'Alone') })
    const answers = await Promise.all(batch)
    t.same(db.inserts.at(-1), [negative.toString(), '10', '11', '13', big.toString()],
      'one statement for the whole batch, each id once, in id order')
    t.same(new Set(db.names), new Set(['plants_insert_batch']), 'the batch INSERT is a prepared statement, planned once per connection')
    t.same(answers.map((a) => a.kind), [
      'created', 'created', 'replayed', 'conflict', 'replayed', 'conflict', 'created', 'replayed', 'created', 'conflict'
    ], 'each request answered for itself; the first of an id wins')
    t.same(answers[3]?.plant, plant(11n, 'Same', 'a'), 'a conflict reports the stored plant')
    t.same(answers[5]?.plant, plant(13n, 'Stored', 'x'), 'an absent tag differs from a stored one')
    t.same(answers[7]?.plant, plant(big, 'Max'), 'ids past 2^53 read back exactly')
    t.same(await storedRows(base, negative, big), [
      { id: negative.toString(), name: 'Neg', tag: null },
      { id: '1', name: 'Alone', tag: null },
      { id: '10', name: 'Twin', tag: null },
      { id: '11', name: 'Same', tag: 'a' },
      { id: '13', name: 'Stored', tag: 'x' },
      { id: big.toString(), name: 'Max', tag: null }
    ], 'one row per id, as first sent')
    await base.query('DELETE FROM plants WHERE id IN ($1::bigint, $2::bigint)', [big.toString(), negative.toString()])
  })

  t.test('no answer settles before its batch statement has returned', async (t) => {
    const db = controlled(base)
    const writer = createPlantStore(db, { writer: { concurrency: 1 } })
    const release = db.hold()
    const seenAt: number[] = []
    const create = async (id: bigint): Promise<CreateOutcome> => {
      const outcome = await writer.create(plant(id, 'Slow'))
      seenAt.push(db.returned)
      return outcome
    }
    const creates = [create(100n)]
    await turns()
    creates.push(...[101n, 101n, 102n].map(create))
    await turns()
    await sleep(50)
    t.same(seenAt, [], 'every request still waits while the write is held')
    release()
    await Promise.all(creates)
    t.equal(seenAt.length, 4)
    t.ok(seenAt[0] !== undefined && seenAt[0] >= 1, 'the first answer came after the first statement returned')
    t.ok(seenAt.slice(1).every((n) => n >= 2), 'the batched answers came after the batch statement returned')
  })

  t.test('a row the database refuses fails alone; its batch siblings are stored', async (t) => {
    const db = controlled(base)
    const writer = createPlantStore(db, { writer: { concurrency: 1 } })
    const release = db.hold()
    const first = writer.create(plant(200n, 'Head'))
    await turns()
    const creates = [
      first,
      writer.create(plant(201n, 'Fine')),
      writer.create(plant(202n, 'Bad\u0000name')),
      writer.create(plant(203n, 'Also fine', 't')),
      writer.create(plant(201n, 'Fine'))
    ]
    release()
    const [head, fine, bad, alsoFine, again] = await outcomes(creates)
    t.same([head, fine, alsoFine, again].map((o) => (o as CreateOutcome).kind), ['created', 'created', 'created', 'replayed'])
    t.type(bad, Error, 'the bad row gets an error of its own')
    t.notOk(bad instanceof StoreUnavailableError, 'a bad row is not "database unavailable"')
    t.same(db.inserts.slice(-4), [['201', '202', '203'], ['201'], ['202'], ['203']], 'the batch, then each row alone')
    t.same((await storedRows(base, 200n, 203n)).map((r) => r.id), ['200', '201', '203'])
  })

  t.test('a batch statement failing for its own reason is retried row by row', async (t) => {
    const db = controlled(base)
    const writer = createPlantStore(db, { writer: { concurrency: 1 } })
    const release = db.hold()
    const head = writer.create(plant(300n, 'Head'))
    await turns()
    const rest = [301n, 302n, 303n].map(async (id) => await writer.create(plant(id, 'Row')))
    db.failWith = (ids) => ids.length > 1 ? new Error('injected: statement too large') : undefined
    release()
    t.same((await Promise.all([head, ...rest])).map((o) => o.kind), ['created', 'created', 'created', 'created'])
    t.same(db.inserts.slice(-4), [['301', '302', '303'], ['301'], ['302'], ['303']])
    t.equal((await storedRows(base, 300n, 303n)).length, 4)
  })

  t.test('an unavailable database fails every request of the batch with 503, without retrying row by row', async (t) => {
    const db = controlled(base)
    const timeoutMs = 300
    const writer = createPlantStore(db, { timeoutMs, writer: { concurrency: 1 } })
    const release = db.hold()
    const head = writer.create(plant(400n, 'Head'))
    await turns()
    const rest = [401n, 402n, 402n].map(async (id) => await writer.create(plant(id, 'Row')))
    db.failWith = (ids) => ids.length > 1 ? Object.assign(new Error('server closed the connection'), { code: '57P01' }) : undefined
    release()
    t.equal((await head).kind, 'created')
    const failed = await outcomes(rest)
    t.ok(failed.every((o) => o instanceof StoreUnavailableError && o.statusCode === 503), 'all three: StoreUnavailableError')
    const sends = db.inserts.slice(1)
    t.ok(sends.length > 1, `the batch was sent again while its deadline allowed (${sends.length} sends)`)
    t.ok(sends.every((ids) => ids.join() === '401,402'), 'always the whole batch: no row-by-row retry against a database that is gone')
    t.same((await storedRows(base, 400n, 402n)).map((r) => r.id), ['400'])
  })

  t.test('a batch refused as read-only (a standby, a demoted primary) is sent again and stored once writable', async (t) => {
    const db = controlled(base)
    const writer = createPlantStore(db, { timeoutMs: 5000, writer: { concurrency: 1 } })
    const release = db.hold()
    const head = writer.create(plant(410n, 'Head'))
    await turns()
    const rest = [411n, 412n, 412n].map(async (id) => await writer.create(plant(id, 'Row', 'ha')))
    let refusals = 3
    db.failWith = (ids) => ids.length > 1 && refusals-- > 0
      ? Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' })
      : undefined
    release()
    t.equal((await head).kind, 'created')
    t.same((await Promise.all(rest)).map((o) => o.kind), ['created', 'created', 'replayed'], 'answered as if nothing had happened')
    t.same(db.inserts.slice(1), Array(4).fill(['411', '412']), 'three refusals, then the same batch stored, never row by row')
    t.same(await storedRows(base, 410n, 412n), [
      { id: '410', name: 'Head', tag: null }, { id: '411', name: 'Row', tag: 'ha' }, { id: '412', name: 'Row', tag: 'ha' }])
  })

  t.test('a read-only database to the deadline: 503 for the batch, and no send starts past it', async (t) => {
    const db = controlled(base)
    const timeoutMs = 300
    const writer = createPlantStore(db, { timeoutMs, writer: { concurrency: 1 } })
    const sentAt: number[] = []
    db.failWith = () => {
      sentAt.push(performance.now())
      return Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' })
    }
    const failed = await outcomes([420n, 421n].map(async (id) => await writer.create(plant(id, 'Row'))))
    t.ok(failed.every((o) => o instanceof StoreUnavailableError && o.statusCode === 503), 'both: StoreUnavailableError (503), not a 500')
    t.ok(sentAt.length > 1, `sent ${sentAt.length} times`)
    // Timed from the first send, not from the create: the deadline counts
    // from the take, which a busy machine may hold back by a turn of the
    // loop, and the first send follows the take with no await between. Each
    // send follows its deadline check with no await either: the 50 ms are
    // for a pause (GC, the OS) in those few microseconds.
    const late = sentAt.map((at) => Math.round(at - (sentAt[0] as number))).filter((ms) => ms >= timeoutMs + 50)
    t.same(late, [], `every send started inside the deadline (sends at ${sentAt.map((at) => Math.round(at - (sentAt[0] as number))).join(', ')} ms)`)
    t.ok(db.inserts.every((ids) => ids.length === 2), 'never row by row')
    t.same(await storedRows(base, 420n, 421n), [])
  })

  t.test('a write sent and not confirmed is sent again: a row it stored is answered as a replay', async (t) => {
    const db = controlled(base)
    const writer = createPlantStore(db, { timeoutMs: 5000, writer: { concurrency: 1 } })
    let lost = 1
    db.loseReplyWith = () => lost-- > 0 ? new OutcomeUnknownError('the write was sent and not confirmed', { cause: new Error('Connection terminated unexpectedly') }) : undefined
    const answers = await Promise.all([430n, 431n].map(async (id) => await writer.create(plant(id, 'Row'))))
    t.same(answers.map((o) => o.kind), ['replayed', 'replayed'], 'the first send stored them; the second found them')
    t.equal(db.inserts.length, 2, 'sent twice')
    t.same((await storedRows(base, 430n, 431n)).map((r) => r.id), ['430', '431'], 'stored once')
  })

  t.test('a write not confirmed by the deadline: 504 for the whole batch, whatever the later sends are told', async (t) => {
    const db = controlled(base)
    const timeoutMs = 300
    const writer = createPlantStore(db, { timeoutMs, writer: { concurrency: 1 } })
    const told: string[] = []
    writer.observe({ answered: (kind) => told.push(kind) })
    let lost = 1
    db.loseReplyWith = () => lost-- > 0 ? new OutcomeUnknownError('the write was sent and not confirmed', { cause: new Error('Connection terminated unexpectedly') }) : undefined
    // Later sends are refused before they reach the database: alone they
    // would be a true 503, but the first send may have committed.
    db.failWith = () => db.inserts.length > 1 ? Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' }) : undefined
    const failed = await outcomes([440n, 441n, 441n].map(async (id) => await writer.create(plant(id, 'Row'))))
    t.ok(failed.every((o) => o instanceof OutcomeUnknownError && o.statusCode === 504), 'all three: OutcomeUnknownError (504)')
    t.ok(db.inserts.length > 1, `sent again inside the deadline (${db.inserts.length} sends)`)
    t.same(told, ['unknown', 'unknown', 'unknown'], 'each create told unknown')
    t.same((await storedRows(base, 440n, 441n)).map((r) => r.id), ['440', '441'], 'the unconfirmed write did commit')
  })

  t.test('past the queue bound a create is refused at once with 503', async (t) => {
    const db = controlled(base)
    const writer = createPlantStore(db, { writer: { concurrency: 1, maxQueue: 3 } })
    const release = db.hold()
    const accepted = [writer.create(plant(500n, 'In flight'))]
    await turns()
    accepted.push(...[501n, 502n, 503n].map(async (id) => await writer.create(plant(id, 'Queued'))))
    const refused = await writer.create(plant(504n, 'Too many')).catch((err: unknown) => err)
    t.type(refused, StoreUnavailableError, 'refused while the others still wait')
    t.equal((refused as StoreUnavailableError).statusCode, 503)
    release()
    t.same((await Promise.all(accepted)).map((o) => o.kind), ['created', 'created', 'created', 'created'])
    t.equal((await writer.create(plant(504n, 'Room again'))).kind, 'created', 'accepted again once the queue drained')
    t.same((await storedRows(base, 500n, 504n)).length, 5)
  })

  t.test('a create still queued at its deadline answers 503 at once and is never written', async (t) => {
    const db = controlled(base)
    const store = createPlantStore(db, { timeoutMs: 300, writer: { concurrency: 1 } })
    const release = db.hold()
    const head = store.create(plant(700n, 'In flight')).catch((err: unknown) => err)
    await turns()
    const queued = store.create(plant(701n, 'Queued')).catch((err: unknown) => err)
    let settledWhileHeld = false
    queued.then(() => { settledWhileHeld = true }, () => {})
    await sleep(900)
    const held = settledWhileHeld
    release()
    const refused = await queued
    t.ok(held, 'answered while the write ahead of it was still held')
    t.type(refused, StoreUnavailableError, 'queued past its deadline: 503')
    await head
    await sleep(100)
    t.notOk(db.inserts.flat().includes('701'), 'its row was never sent')
    t.same((await storedRows(base, 701n, 701n)).length, 0, 'and is not stored')
  })

  // PostgreSQL: the server's statement_timeout bounds the write, so the
  // client-side deadline must not answer 503 for a row that then commits.
  // PGlite cannot cancel a statement: its batch is rolled back instead.
  const overrun = backend === 'postgres'
    ? 'a batch already sent is answered by its real outcome, even past the deadline'
    : 'a batch whose write overruns the deadline is rolled back and answered 503'
  t.test(overrun, async (t) => {
    const db = controlled(base)
    const store = createPlantStore(db, { timeoutMs: 200, writer: { concurrency: 1 } })
    const release = db.hold()
    const sent = store.create(plant(710n, 'Slow write')).catch((err: unknown) => err)
    await sleep(600)
    release()
    const outcome = await sent
    await sleep(100)
    const stored = (await storedRows(base, 710n, 710n)).length
    if (backend === 'postgres') {
      t.same(outcome, { kind: 'created', plant: plant(710n, 'Slow write') }, '200 created, not 503')
      t.equal(stored, 1, 'stored')
    } else {
      t.type(outcome, StoreUnavailableError, '503')
      t.equal(stored, 0, 'nothing stored')
      t.equal((await store.create(plant(710n, 'Slow write'))).kind, 'created', 'the retry creates it')
    }
  })

  t.test('a batch is bounded by the bytes of its names and tags as well as by rows', async (t) => {
    const db = controlled(base)
    const writer = createPlantStore(db, { writer: { concurrency: 1, maxBatchChars: 100 } })
    const release = db.hold()
    const head = writer.create(plant(730n, 'Head'))
    await turns()
    const rest = [731n, 732n, 733n, 734n, 735n].map(async (id) => await writer.create(plant(id, 'n'.repeat(30), 't'.repeat(10))))
    release()
    await Promise.all([head, ...rest])
    t.same(db.inserts.slice(-3), [['731', '732'], ['733', '734'], ['735']], '80 bytes a batch: two rows each')
    t.equal((await storedRows(base, 730n, 735n)).length, 6)
  })

  t.test('concurrent batches holding the same ids in opposite order store each id once', async (t) => {
    const writer = createPlantStore(base, { writer: { concurrency: 4, maxBatch: 8 } })
    const ids = Array.from({ length: 200 }, (_, i) => 600n + BigInt(i % 2 === 0 ? i % 25 : 24 - (i % 25)))
    const answers = await Promise.all(ids.map(async (id) => await writer.create(plant(id, `P${id}`))))
    const created = answers.filter((a) => a.kind === 'created').map((a) => a.plant.id)
    t.equal(new Set(created).size, 25, 'one create per id')
    t.equal(created.length, 25)
    t.ok(answers.every((a) => a.kind !== 'conflict'), 'the rest are replays')
    t.equal((await storedRows(base, 600n, 624n)).length, 25)
  })
})

forEachBackend(t, 'POST /plants through the batching writer', async (t, backend) => {
  const testDb = await createTestDatabase(backend)
  const writer: WriterOptions = { concurrency: 1, maxQueue: 3 }
  const app = await buildApp({ config: testConfig(testDb.database, { dbTimeoutMs: 20_000 }), writer })
  await app.ready()
  t.teardown(async () => {
    await app.close()
    await testDb.drop()
  })

  // Holds every write until the returned function runs: PGlite runs
  // nothing else while a transaction is open; on PostgreSQL a SHARE lock
  // blocks INSERTs.
  const stall = async (): Promise<() => Promise<void>> => {
    let open!: () => void
    const gate = new Promise<void>((resolve) => { open = resolve })
    let locked!: () => void
    const isLocked = new Promise<void>((resolve) => { locked = resolve })
    const done = app.db.transaction(async (tx) => {
      if (app.db.kind === 'postgres') await tx.query('LOCK TABLE plants IN SHARE MODE')
      locked()
      await gate
    })
    await isLocked
    return async () => { open(); await done }
  }

  t.test('a full queue answers 503 in the Error shape with Retry-After', async (t) => {
    const release = await stall()
    let held = true
    const requests = [1, 2, 3, 4, 5, 6, 7].map(async (id) => {
      const res = await postPlant(app, `{"id": ${id}, "name": "Q${id}"}`)
      return { res, whileHeld: held }
    })
    // At most one write in flight and three queued: three or four of the
    // seven are refused while the database is still held.
    await sleep(300)
    held = false
    await release()
    const answers = await Promise.all(requests)
    const refused = answers.filter((a) => a.res.statusCode === 503)
    const stored = answers.filter((a) => a.res.statusCode === 200)
    t.equal(refused.length + stored.length, 7, 'every request is stored or refused')
    t.ok(refused.length >= 3 && refused.length <= 4, `${refused.length} refused`)
    t.ok(refused.every((a) => a.whileHeld), 'refused at once, not after the database came back')
    t.ok(stored.every((a) => !a.whileHeld), 'nothing answered 200 before its write')
    for (const { res } of refused) {
      assertErrorShape(t, res, 503)
      t.equal(res.headers['retry-after'], '5')
    }
    const rows = await app.db.query<{ n: string | number }>('SELECT count(*) AS n FROM plants')
    t.equal(Number(rows[0]?.n), stored.length, 'one row per 200')
  })

  t.test('the same id twice in one batch: one row, a replay and a conflict', async (t) => {
    const release = await stall()
    const bodies = [
      '{"id": 50, "name": "Head"}',
      '{"id": 60, "name": "Twin", "tag": "x"}',
      '{"id": 60, "name": "Twin", "tag": "x"}',
      '{"id": 60, "name": "Twin", "tag": "y"}'
    ]
    // The first is written alone and held; the other three queue behind
    // it and share the next batch (the queue holds three).
    const requests = [postPlant(app, bodies[0] as string)]
    await sleep(200)
    requests.push(...bodies.slice(1).map(async (body) => await postPlant(app, body)))
    await sleep(200)
    await release()
    const answers = await Promise.all(requests)
    const stored = await app.db.query<{ tag: string }>('SELECT tag FROM plants WHERE id = 60')
    t.equal(stored.length, 1, 'one row')
    const tag = stored[0]?.tag
    answers.slice(1).forEach((res, i) => {
      if (bodies[i + 1]?.includes(`"tag": "${tag}"`)) t.same([res.statusCode, JSON.parse(res.body)], [200, { name: 'Twin', tag }])
      else assertErrorShape(t, res, 409)
    })
  })
})

t.test('a watcher that throws changes no answer and leaves no create unanswered', async (t) => {
  const db = await openDb(t, 'pglite')
  const writer = createPlantStore(db)
  const boom = (): never => { throw new Error('a watcher bug') }
  writer.observe({ queued: boom, batchStarted: boom, batchFinished: boom, answered: boom })
  const answers = await outcomes([
    writer.create(plant(1n, 'A')),
    writer.create(plant(1n, 'A')),
    writer.create(plant(1n, 'B')),
    writer.create(plant(2n, 'C'))
  ])
  t.same(answers.map((a) => a instanceof Error ? a.message : a.kind), ['created', 'replayed', 'conflict', 'created'])
  t.same(await storedRows(db, 1n, 2n), [{ id: '1', name: 'A', tag: null }, { id: '2', name: 'C', tag: null }])
})
