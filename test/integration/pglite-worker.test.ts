import t from 'tap'
import { openPglite } from '../../src/store/pglite/index.js'
import { pgliteOverThread, STAGE_CHARS, startPgliteThread } from '../../src/store/pglite/thread-calls.js'
import { isUnavailable, StoreUnavailableError } from '../../src/store/store-errors.js'

// The embedded database on its own thread speaks the store's Db interface
// as PGlite on the HTTP thread did: exact int8, errors with their SQLSTATE,
// transactions that nothing interleaves with, and a dead thread is a 503.

t.test('values cross the thread exactly and errors keep their SQLSTATE', async (t) => {
  const db = await openPglite('memory://')
  t.teardown(async () => await db.close())
  const [row] = await db.query<{ big: unknown, small: unknown }>('SELECT 9223372036854775807::bigint AS big, $1::bigint AS small', ['-9223372036854775808'])
  t.equal(row?.big, 9223372036854775807n, 'int8 max stays exact')
  t.equal(row?.small, -9223372036854775808n, 'int8 min stays exact')

  await db.exec('CREATE TABLE t (id bigint PRIMARY KEY)')
  await db.query('INSERT INTO t VALUES (1)')
  const duplicate = await db.query('INSERT INTO t VALUES (1)').catch((err: unknown) => err)
  t.match(duplicate, { code: '23505', constraint: 't_pkey' }, 'a unique violation keeps its code and constraint')
  t.notOk(isUnavailable(duplicate), 'and is not taken for an unavailable database')
  t.notOk('params' in (duplicate as object), 'the statement parameters stay behind')
  const syntax = await db.exec('SELEC 1').catch((err: unknown) => err)
  t.match(syntax, { code: '42601' })
  t.notOk(syntax instanceof StoreUnavailableError)
})

t.test('a transaction commits, rolls back on a throw, and nothing interleaves with it', async (t) => {
  const db = await openPglite('memory://')
  t.teardown(async () => await db.close())
  await db.exec('CREATE TABLE t (id int PRIMARY KEY)')

  t.equal(await db.transaction(async (tx) => {
    await tx.query('INSERT INTO t VALUES (1)')
    return 'done'
  }), 'done')
  await t.rejects(db.transaction(async (tx) => {
    await tx.query('INSERT INTO t VALUES (2)')
    throw new Error('changed my mind')
  }), /changed my mind/)

  // A statement sent while a transaction is open runs after it ends, so it
  // never sees (or joins) the transaction's uncommitted work.
  const order: string[] = []
  let outside: Promise<unknown> | undefined
  await db.transaction(async (tx) => {
    await tx.query('INSERT INTO t VALUES (3)')
    outside = db.query<{ n: number }>('SELECT count(*)::int AS n FROM t').then((rows) => { order.push('outside'); return rows[0]?.n })
    await new Promise((resolve) => setTimeout(resolve, 50))
    await tx.query('INSERT INTO t VALUES (4)')
    order.push('transaction')
  })
  t.equal(await outside, 3, 'the outside statement sees the committed rows 1, 3 and 4')
  t.same(order, ['transaction', 'outside'])
  t.same((await db.query<{ id: number }>('SELECT id FROM t ORDER BY id')).map((r) => r.id), [1, 3, 4], 'the rolled-back row is not there')
})

t.test('a large array parameter crosses in parts and arrives whole', async (t) => {
  const db = await openPglite('memory://')
  t.teardown(async () => await db.close())
  const names = ['a', 'b', 'c', 'd', 'e'].map((c) => c.repeat(Math.ceil(STAGE_CHARS / 2)))
  const [row] = await db.query<{ n: number, total: number, firsts: string }>(
    "SELECT array_length($1::text[], 1) AS n, (SELECT sum(length(x))::int FROM unnest($1::text[]) x) AS total, (SELECT string_agg(left(x, 1), '') FROM unnest($1::text[]) x) AS firsts, $2::int AS two",
    [names, 2])
  t.same(row, { n: 5, total: 5 * Math.ceil(STAGE_CHARS / 2), firsts: 'abcde', two: 2 })
})

t.test('a thread that dies fails its calls with StoreUnavailableError instead of hanging', async (t) => {
  const worker = startPgliteThread({ dataDir: 'memory://', extraStartParams: [] })
  const db = await pgliteOverThread(worker)
  t.same(await db.query('SELECT 1 AS one'), [{ one: 1 }])
  // Slow enough that the thread is always still running it when terminated.
  const inFlight = db.query('SELECT pg_sleep(2)')
  await worker.terminate()
  await t.rejects(inFlight, StoreUnavailableError, 'the call in flight fails')
  await t.rejects(db.query('SELECT 3'), StoreUnavailableError, 'and so does every later one')
  await t.rejects(db.transaction(async () => {}), StoreUnavailableError)
  await db.close()
})
