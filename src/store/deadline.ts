import { StoreUnavailableError } from './errors.js'

// Bounds one store operation as a whole. The driver's own timeouts bound each
// step (pool checkout, connect, each statement), but a create is several
// steps, so without this the client could wait a multiple of DB_TIMEOUT_MS.
// The work is not cancelled: a write that commits after the deadline stays
// stored, and the client, told 503, retries and gets 200 (a replay).
export async function withDeadline<T> (work: Promise<T>, ms: number, what: string): Promise<T> {
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
