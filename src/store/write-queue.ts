import { StoreUnavailableError } from './store-errors.js'

// When each batch of waiting items is sent, whatever they are; plant-store.ts
// writes creates with it. The bounds and deadlines: docs/architecture.md,
// "The write queue".

export interface Pending<T, R> {
  item: T
  // performance.now() past which it may no longer be sent.
  expiresAt: number
  resolve: (result: R) => void
  reject: (err: unknown) => void
}

export interface WriteQueueOptions {
  maxBatch: number
  // What `weigh` adds up to in a batch (a batch holds at least one item).
  maxBatchBytes: number
  // Past it enqueue refuses (503): a stalled database turns into quick
  // answers and bounded memory, not a backlog.
  maxQueue: number
  concurrency: number
  // How long a create may wait to be sent (Infinity: no bound).
  timeoutMs: number
}

// `write` answers every item of its batch itself and never rejects; `weigh`
// is an item's share of maxBatchBytes.
export function createWriteQueue<T, R> (options: WriteQueueOptions, weigh: (item: T) => number, write: (batch: Array<Pending<T, R>>) => Promise<void>) {
  const { maxBatch, maxBatchBytes, maxQueue, concurrency, timeoutMs } = options
  const queue: Array<Pending<T, R>> = []
  let inFlight = 0
  const expiry = expiryTimer(queue, timeoutMs)

  // No timer: a batch starts in the check phase of its first create's turn.
  // Starting in the request's own microtasks would send that create alone.
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
    depth: () => queue.length,
    inFlight: () => inFlight
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

// The queue is FIFO and every create gets the same timeout, so the head
// expires first: one timer, armed for the head's expiry, serves the queue.
function expiryTimer (queue: Array<Pending<unknown, never>>, timeoutMs: number): { dropExpired: () => void, arm: () => void } {
  let timer: NodeJS.Timeout | undefined
  let armedFor = Infinity
  const dropExpired = (): void => {
    const now = performance.now()
    let n = 0
    while (n < queue.length && (queue[n] as Pending<unknown, never>).expiresAt <= now) n++
    if (n === 0) return
    const err = new StoreUnavailableError(`create waited ${timeoutMs} ms for the database; nothing was written`)
    for (const p of queue.splice(0, n)) p.reject(err)
  }
  const arm = (): void => {
    const at = queue[0]?.expiresAt ?? Infinity
    if (timer !== undefined && at === armedFor) return
    clearTimeout(timer)
    timer = undefined
    armedFor = at
    if (!Number.isFinite(at)) return
    timer = setTimeout(() => {
      timer = undefined
      dropExpired()
      arm()
    }, Math.max(0, at - performance.now()))
  }
  return { dropExpired, arm }
}
