import { StoreUnavailableError } from './store-errors.js'

// When each batch of waiting items is sent (docs/architecture.md, "The write queue").

export interface Pending<T, R> {
  item: T
  expiresAt: number // performance.now() past which it may no longer be sent
  resolve: (result: R) => void
  reject: (err: unknown) => void
}

export interface WriterStats { queueDepth: number, inFlight: number }

export interface WriteQueueOptions {
  maxBatch: number
  maxBatchBytes: number // what `weigh` adds up to in a batch (a batch holds at least one item)
  maxQueue: number // past it enqueue refuses (503): a stalled database makes quick answers, not a backlog
  concurrency: number
  timeoutMs: number // how long an item may wait to be sent
}

// `write` answers every item of its batch itself and never rejects.
export function createWriteQueue<T, R> (options: WriteQueueOptions, weigh: (item: T) => number, write: (batch: Array<Pending<T, R>>) => Promise<void>) {
  const { maxBatch, maxBatchBytes, maxQueue, concurrency, timeoutMs } = options
  const queue: Array<Pending<T, R>> = []
  let inFlight = 0
  const expiry = expiryTimer(queue, timeoutMs)

  // A batch starts in the check phase of its first create's turn: in the request's microtasks it would send it alone.
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
      const batch = queue.splice(0, batchLength(queue, weigh, maxBatch, maxBatchBytes))
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
    enqueue (item: T): Promise<R> {
      if (full()) return Promise.reject(new StoreUnavailableError(`${queue.length} creates are already waiting for the database`))
      return new Promise<R>((resolve, reject) => {
        queue.push({ item, expiresAt: performance.now() + timeoutMs, resolve, reject })
        if (queue.length === 1) expiry.arm()
        if (inFlight < concurrency) schedule()
      })
    },
    stats: (): WriterStats => ({ queueDepth: queue.length, inFlight })
  }
}

// How many items from the head make the next batch.
function batchLength<T> (queue: ReadonlyArray<{ item: T }>, weigh: (item: T) => number, maxBatch: number, maxBatchBytes: number): number {
  let rows = 0
  let bytes = 0
  for (const p of queue) {
    bytes += weigh(p.item)
    if (rows === maxBatch || (rows > 0 && bytes > maxBatchBytes)) break
    rows++
  }
  return rows
}

// FIFO with one timeout for all, so the head expires first: one timer, armed for the head's expiry, serves the
// queue. A head taken meanwhile only makes it fire early, and it is armed again for the new head.
function expiryTimer (queue: Array<Pending<unknown, never>>, timeoutMs: number): { dropExpired: () => void, arm: () => void } {
  let timer: NodeJS.Timeout | undefined
  const dropExpired = (): void => {
    const now = performance.now()
    let n = 0
    while (n < queue.length && (queue[n] as Pending<unknown, never>).expiresAt <= now) n++
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
