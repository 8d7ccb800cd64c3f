import type { BaseLogger } from 'pino'
import type { Db } from './db.js'
import { StoreUnavailableError, withDeadline } from './store-errors.js'

// Whether a write can commit now (docs/operations.md, "Health"), for GET /health/ready.

// Orchestrators give a probe 1 s by default, however long DB_TIMEOUT_MS is.
export const READY_TIMEOUT_MS = 800

// A read-only session raises 25006, so its connection is dropped. The WAL message's commit waits for a synchronous
// standby as a create's does, so a stalled standby makes the service not ready.
const probeSql =
  'DO $$ BEGIN IF pg_is_in_recovery() OR current_setting(\'transaction_read_only\')::boolean THEN ' +
  'RAISE EXCEPTION \'the database does not accept writes\' USING ERRCODE = \'read_only_sql_transaction\'; END IF; ' +
  'PERFORM pg_logical_emit_message(true, \'plant-store\', \'ready\'); END $$'

// With less than a WAL segment free, every commit fails (PGlite on disk only).
const MIN_FREE_BYTES = 16 * 1024 * 1024

async function probeCommit (db: Db): Promise<void> {
  await (db.probe === undefined ? db.exec(probeSql) : db.probe(probeSql))
  if (db.freeBytes !== undefined && await db.freeBytes() < MIN_FREE_BYTES) {
    throw new StoreUnavailableError('less than one WAL segment is free on the embedded database\'s disk')
  }
}

// One probe at a time, so a stalled commit holds one connection, never one per probe.
export function readinessProbe (db: Db, boundMs: number, migrated: () => boolean, log?: Pick<BaseLogger, 'debug'>): () => Promise<boolean> {
  let inFlight: Promise<void> | undefined
  return async () => {
    if (!migrated()) return false
    inFlight ??= probeCommit(db).finally(() => { inFlight = undefined })
    return await withDeadline(inFlight, boundMs, 'readiness check').then(() => true, (err: unknown) => {
      // At debug: the refused creates and the migration retries show an outage at warn.
      log?.debug({ err }, 'readiness check failed')
      return false
    })
  }
}
