// The messages between the HTTP thread and the thread that owns PGlite (thread.ts). Values cross by
// structured clone, which keeps bigint (int8) and Date exact.

// extraStartParams: added to PGlite's own.
export interface PgliteThreadData { dataDir: string, extraStartParams: string[] }

// `tx` names an open transaction session; without, the statement runs alone (PGlite queues it behind any open one).
export type Request =
  | { id: number, op: 'query', text: string, params?: unknown[], tx?: number }
  // Part of one array parameter of the query with the same id, sent before it.
  | { id: number, op: 'stage', slot: number, items: unknown[] }
  | { id: number, op: 'exec', text: string, tx?: number }
  // Answered with the session's number once BEGIN has run.
  | { id: number, op: 'begin' }
  // Ends a session: COMMIT, or ROLLBACK. Answered once that has run.
  | { id: number, op: 'end', tx: number, commit: boolean }
  | { id: number, op: 'close' }

// An error as plain data: its class does not cross threads, its name, message and fields (SQLSTATE code…) do.
export type ErrorData = Record<string, unknown> & { name: string, message: string }

export type Reply =
  | { id: number, ok: true, value?: unknown }
  | { id: number, ok: false, error: ErrorData }

// Sent once, first: PGlite is open, or why it could not be.
export type Started = { started: true } | { started: false, error: ErrorData }

export function errorToData (err: unknown): ErrorData {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) }
  const data: ErrorData = { name: err.name, message: err.message }
  if (err.stack !== undefined) data.stack = err.stack
  for (const [key, value] of Object.entries(err)) {
    // The statement's parameters (plant data, up to the body limit) would be copied for nothing and must never be logged.
    if (key !== 'params' && isCloneable(value)) data[key] = value
  }
  return data
}

export function errorFromData (data: ErrorData): Error {
  const { name, message, stack, ...fields } = data
  const err = Object.assign(new Error(message), fields, { name })
  if (typeof stack === 'string') err.stack = stack
  return err
}

function isCloneable (value: unknown): boolean {
  return value === null || ['string', 'number', 'bigint', 'boolean', 'undefined'].includes(typeof value)
}
