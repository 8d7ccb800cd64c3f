import { Worker } from 'node:worker_threads'
import { once } from 'node:events'
import { setImmediate } from 'node:timers/promises'
import { extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { commitOrRollBack, type Db, type Row, type Sql } from '../db.js'
import { asStoreError, StoreUnavailableError } from '../store-errors.js'
import { errorFromData, type PgliteThreadData, type Reply, type Request, type Started } from './protocol.js'

// The thread's file beside this one: .js compiled to dist/, .ts under tsx, whose hooks the worker shares (Node 22.2+).
const threadFile = new URL(`./thread${extname(fileURLToPath(import.meta.url))}`, import.meta.url)

// The thread's connection, before index.ts adds the write rules.
export type Connection = Omit<Db, 'writers' | 'writeBefore' | 'freeBytes' | 'probe'>

export function startPgliteThread (data: PgliteThreadData): Worker {
  return new Worker(threadFile, { workerData: data })
}

type Call = Request extends infer R ? R extends Request ? Omit<R, 'id'> : never : never
type Stage = Omit<Extract<Request, { op: 'stage' }>, 'id'>

// Structured clone copies a message on the sending thread in one go, in time that grows with its size: array
// parameters larger than this go ahead in parts of about this size, so the HTTP loop runs between them.
export const STAGE_CHARS = 4 * 1024 * 1024

function stageParams (params: unknown[]): { inline: unknown[], parts: Stage[] } {
  const inline = [...params]
  const parts: Stage[] = []
  params.forEach((param, slot) => {
    if (!Array.isArray(param) || charsOf(param) <= STAGE_CHARS) return
    inline[slot] = null
    let start = 0
    let chars = 0
    param.forEach((item, i) => {
      chars += charsOf(item)
      if (chars < STAGE_CHARS && i < param.length - 1) return
      parts.push({ op: 'stage', slot, items: param.slice(start, i + 1) })
      start = i + 1
      chars = 0
    })
  })
  return { inline, parts }
}

// Close enough for sizing messages: strings dominate; anything else is small.
function charsOf (value: unknown): number {
  if (typeof value === 'string') return value.length
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + charsOf(item), 0)
  return 8
}

// The store's Db over a thread running thread.ts, once PGlite is open there. Errors come through asStoreError;
// a thread that dies fails what it was doing and everything after with StoreUnavailableError, never a hang.
export async function pgliteOverThread (worker: Worker): Promise<Connection> {
  await started(worker)
  const thread = callsTo(worker)
  let closing: Promise<void> | undefined
  return {
    kind: 'pglite',
    ...sqlOver(thread.call),
    // Statements sent outside the session wait in PGlite until it ends.
    async transaction (fn) {
      const tx = await thread.call({ op: 'begin' }) as number
      return await commitOrRollBack(sqlOver(thread.call, tx), async (commit) => await thread.call({ op: 'end', tx, commit }), fn)
    },
    async close () {
      closing ??= (async () => {
        if (!thread.gone()) await thread.call({ op: 'close' }).catch(() => {})
        thread.stop(new StoreUnavailableError('The embedded database is closed'))
        // An idle thread is unref'd: referenced, its exit keeps the event loop alive until terminate() resolves.
        worker.ref()
        await worker.terminate()
      })()
      await closing
    }
  }
}

type CallThread = (request: Call, parts?: Stage[]) => Promise<unknown>

// Statements as calls to the thread, in the transaction tx if given; large arrays go ahead in parts (stageParams).
function sqlOver (call: CallThread, tx?: number): Sql {
  const session = tx === undefined ? {} : { tx }
  return {
    async query<R extends Row = Row>(text: string, params?: unknown[]) {
      if (params === undefined) return await call({ op: 'query', text, ...session }) as R[]
      const { inline, parts } = stageParams(params)
      return await call({ op: 'query', text, params: inline, ...session }, parts) as R[]
    },
    exec: async (text: string) => { await call({ op: 'exec', text, ...session }) }
  }
}

// Requests to the thread and their replies, matched by id. Idle, the thread does not keep the process alive,
// as PGlite on this thread did not; while a call waits, it does.
function callsTo (worker: Worker) {
  const pending = new Map<number, { resolve: (value: unknown) => void, reject: (err: unknown) => void }>()
  let nextId = 1
  // Set once the thread is closed or crashed: every call fails with it.
  let gone: StoreUnavailableError | undefined
  const stop = (err: StoreUnavailableError): void => {
    gone ??= err
    for (const p of pending.values()) p.reject(gone)
    pending.clear()
  }
  const settled = (id: number): boolean => {
    if (!pending.delete(id)) return false
    if (pending.size === 0) worker.unref()
    return true
  }
  worker.on('message', (reply: Reply) => {
    const p = pending.get(reply.id)
    if (p === undefined || !settled(reply.id)) return
    if (reply.ok) p.resolve(reply.value)
    else p.reject(asStoreError(errorFromData(reply.error)))
  })
  worker.on('error', (err) => stop(new StoreUnavailableError('The embedded database failed', { cause: err })))
  worker.on('exit', (code) => stop(new StoreUnavailableError(`The embedded database stopped (thread exit ${code})`)))
  worker.unref()

  const post = (message: Request): void => {
    if (gone !== undefined) throw gone
    worker.postMessage(message)
  }
  // The parts go first, one message each, and the event loop runs between them.
  const call: CallThread = async (request, parts = []) => {
    if (gone !== undefined) throw gone
    const id = nextId++
    return await new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject })
      if (pending.size === 1) worker.ref()
      const send = async (): Promise<void> => {
        for (const part of parts) {
          post({ ...part, id })
          await setImmediate()
        }
        post({ ...request, id })
      }
      send().catch((err: unknown) => {
        // The thread is gone, or a parameter structured clone cannot copy.
        if (settled(id)) reject(err)
      })
    })
  }
  return { call, gone: () => gone !== undefined, stop }
}

// The thread's first message, its 'error' (once() rejects with it) or its exit.
async function started (worker: Worker): Promise<void> {
  const waiting = new AbortController()
  const exited = once(worker, 'exit', { signal: waiting.signal }).then(([code]) => {
    throw new Error(`the embedded database thread exited with code ${String(code)} before it opened`)
  })
  try {
    const [message] = await Promise.race([once(worker, 'message', { signal: waiting.signal }), exited]) as [Started]
    if (!message.started) throw errorFromData(message.error)
  } finally {
    waiting.abort()
  }
}
