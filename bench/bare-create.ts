import Fastify from 'fastify'
import pg from 'pg'
import { PGlite } from '@electric-sql/pglite'
import { insertBatchSql } from '../src/store/plant-store.js'
import { PGLITE_MAX_CONNECTIONS, PGLITE_SHARED_BUFFERS } from '../src/store/pglite/index.js'

// The yardstick: what the service is, a durable batched create, with none
// of the contract. Fastify with its default JSON parser, no auth and no
// validation; the creates of an event-loop turn are gathered into the
// service's own prepared INSERT … unnest … ON CONFLICT DO NOTHING RETURNING,
// up to two batches in flight on PostgreSQL (one on PGlite, which runs one
// statement at a time), and each is answered 200 once its batch committed
// (409 should its id be stored already; the bench's ids never are).
// DATABASE_URL selects PostgreSQL, PGLITE_DATA_DIR PGlite opened in this
// process; the table comes from the service's migrations (npm run migrate).

interface Waiting {
  id: string
  name: string
  tag: string | null
  answer: (created: boolean) => void
  fail: (err: unknown) => void
}

type Run = (params: unknown[]) => Promise<Array<{ id: unknown }>>

async function openDatabase (): Promise<{ run: Run, concurrency: number, close: () => Promise<void> }> {
  const url = process.env.DATABASE_URL
  if (url !== undefined && url !== '') {
    const pool = new pg.Pool({ connectionString: url, max: 2 })
    const statement = { name: 'plants_insert_batch', text: insertBatchSql }
    return {
      run: async (values) => (await pool.query<{ id: unknown }>({ ...statement, values })).rows,
      concurrency: 2,
      close: async () => await pool.end()
    }
  }
  // The service's settings for the embedded database; PGlite runs here on
  // the HTTP thread, as PGlite is used plainly (the service gives it a
  // thread of its own, so the ratio on PGlite weighs that too).
  const db = await PGlite.create(process.env.PGLITE_DATA_DIR as string, {
    startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${PGLITE_SHARED_BUFFERS}`, '-c', `max_connections=${PGLITE_MAX_CONNECTIONS}`]
  })
  return {
    run: async (values) => (await db.query<{ id: unknown }>(insertBatchSql, values)).rows,
    concurrency: 1,
    close: async () => await db.close()
  }
}

const database = await openDatabase()
const queue: Waiting[] = []
let inFlight = 0
let scheduled = false

async function write (batch: Waiting[]): Promise<void> {
  try {
    const rows = await database.run([batch.map((w) => w.id), batch.map((w) => w.name), batch.map((w) => w.tag)])
    const created = new Set(rows.map((row) => String(row.id)))
    for (const w of batch) w.answer(created.has(w.id))
  } catch (err) {
    for (const w of batch) w.fail(err)
  }
}

function pump (): void {
  scheduled = false
  while (inFlight < database.concurrency && queue.length > 0) {
    inFlight++
    write(queue.splice(0, 256)).finally(() => {
      inFlight--
      schedule()
    })
  }
}

function schedule (): void {
  if (scheduled) return
  scheduled = true
  setImmediate(pump)
}

const app = Fastify({ logger: false })

app.post('/plants', async (request, reply) => {
  const { id, name, tag } = request.body as { id: number, name: string, tag?: string }
  const created = await new Promise<boolean>((resolve, reject) => {
    queue.push({ id: String(id), name, tag: tag ?? null, answer: resolve, fail: reject })
    schedule()
  })
  if (!created) return await reply.code(409).send({ error: 409, message: 'conflict' })
  return tag === undefined ? { name } : { name, tag }
})
app.get('/health/ready', async () => ({ status: 'ready' }))

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    app.close().then(async () => await database.close()).then(() => process.exit(0), () => process.exit(1))
  })
}
