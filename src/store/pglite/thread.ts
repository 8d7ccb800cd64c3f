import { parentPort, workerData } from 'node:worker_threads'
import { EventEmitter, on } from 'node:events'
import { setFlagsFromString } from 'node:v8'
import type { PGlite as PGliteType, Transaction } from '@electric-sql/pglite'
import { errorToData, type PgliteThreadData, type Reply, type Request, type Started } from './protocol.js'

// The thread that owns the embedded database (thread-calls.ts starts it): a large statement keeps it busy, not HTTP.

// TurboFan's tier-up of PGlite's WebAssembly held more resident memory for no throughput (bench/RESULTS.md):
// stay on Liftoff. V8 reads the flag when it compiles a module, so it is set before PGlite is loaded.
setFlagsFromString('--liftoff-only')
const { PGlite } = await import('@electric-sql/pglite')

const port = parentPort as NonNullable<typeof parentPort>
const { dataDir, extraStartParams } = workerData as PgliteThreadData

// A transaction session: the statements sent for it arrive as its 'request' events, in order, until it ends. PGlite
// holds every other statement back meanwhile.
const sessions = new Map<number, EventEmitter>()

const send = (message: Reply | Started): void => port.postMessage(message)
const fail = (id: number, err: unknown): void => send({ id, ok: false, error: errorToData(err) })

const opened = await PGlite.create(dataDir, { startParams: [...PGlite.defaultStartParams, ...extraStartParams] }).catch((err: unknown) => {
  // Closing the port lets the thread end; the HTTP thread reports why.
  send({ started: false, error: errorToData(err) })
  port.close()
})
if (opened !== undefined) {
  send({ started: true })
  port.on('message', (request: Request) => serve(opened, request))
}

// Array parameters sent ahead in parts, by query id and slot.
const staging = new Map<number, Map<number, unknown[]>>()

function stage ({ id, slot, items }: Extract<Request, { op: 'stage' }>): void {
  const slots = staging.get(id) ?? new Map<number, unknown[]>()
  staging.set(id, slots.set(slot, (slots.get(slot) ?? []).concat(items)))
}

function paramsOf (request: Extract<Request, { op: 'query' }>): unknown[] | undefined {
  const slots = staging.get(request.id)
  if (slots === undefined) return request.params
  staging.delete(request.id)
  const params = [...(request.params ?? [])]
  for (const [slot, items] of slots) params[slot] = items
  return params
}

async function run (target: PGliteType | Transaction, request: Extract<Request, { op: 'query' | 'exec' }>): Promise<void> {
  try {
    const value = request.op === 'query'
      ? (await target.query(request.text, paramsOf(request))).rows
      : await target.exec(request.text).then(() => undefined)
    send({ id: request.id, ok: true, value })
  } catch (err) {
    fail(request.id, err)
  }
}

class Rollback extends Error {}

// BEGIN runs when PGlite gets to it; the session then serves the statements sent until a commit or a rollback.
async function begin (db: PGliteType, id: number): Promise<void> {
  const inbox = new EventEmitter()
  sessions.set(id, inbox)
  let end: number | undefined
  try {
    await db.transaction(async (tx) => {
      // Listening before BEGIN is answered: the caller sends the session's statements only after that answer.
      const requests = on(inbox, 'request')
      send({ id, ok: true, value: id })
      for await (const [request] of requests as AsyncIterableIterator<[Request]>) {
        if (request.op === 'end') {
          end = request.id
          if (!request.commit) throw new Rollback()
          return
        }
        if (request.op === 'query' || request.op === 'exec') await run(tx, request)
      }
    })
    send({ id: end as number, ok: true })
  } catch (err) {
    // Before the session began, the error is BEGIN's; after, COMMIT's or ROLLBACK's, for the request that ended it.
    if (end === undefined) fail(id, err)
    else if (err instanceof Rollback) send({ id: end, ok: true })
    else fail(end, err)
  } finally {
    sessions.delete(id)
  }
}

function serve (db: PGliteType, request: Request): void {
  const tx = 'tx' in request ? request.tx : undefined
  if (tx !== undefined) {
    const inbox = sessions.get(tx)
    if (inbox === undefined) return fail(request.id, new Error('Transaction is closed'))
    inbox.emit('request', request)
    return
  }
  if (request.op === 'stage') stage(request)
  else if (request.op === 'query' || request.op === 'exec') run(db, request).catch((err: unknown) => fail(request.id, err))
  else if (request.op === 'begin') begin(db, request.id).catch((err: unknown) => fail(request.id, err))
  else if (request.op === 'close') {
    db.close().then(() => {
      send({ id: request.id, ok: true })
      port.close()
    }, (err: unknown) => fail(request.id, err))
  }
}
