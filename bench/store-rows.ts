// The store run's database contents and the WAL it writes (bench/store.ts).
import { withClient } from '../test/support/database.js'

// Rows per INSERT while loading: one transaction each, and a progress line.
const CHUNK = 1_000_000

// Random positive int64 ids, spread over the whole range like the load's
// (create-load.lua with random ids: 1–9223371 then 12 digits of sequence
// number, below 5·10^11), so a create lands on any leaf of the primary key's
// index; the last 12 digits here are at or above 5·10^11, so no stored id is
// ever one the load sends.
const RANDOM_ID = '(1 + floor(random() * 9223371))::bigint * 1000000000000 + 500000000000 + floor(random() * 500000000000)::bigint'

// Loads `rows` rows with random ids into the migrated, empty plants table, in
// random order with its primary key in place, as a store that grew by
// clients' creates; then VACUUM ANALYZE, as autovacuum would have done, and
// a CHECKPOINT, so the rounds start as right after one. Resolves with the
// rows stored (a random id may repeat) and the seconds each part took.
export async function loadStore (url: string, rows: number, log: (line: string) => void): Promise<{ stored: number, insert: number, vacuum: number }> {
  return await withClient(url, async (c) => {
    const started = performance.now()
    let stored = 0
    for (let done = 0; done < rows; done += CHUNK) {
      const n = Math.min(CHUNK, rows - done)
      stored += (await c.query(`INSERT INTO plants (id, name, tag) SELECT id, 'Plant ' || id, 'stored' FROM (SELECT ${RANDOM_ID} AS id FROM generate_series(1, ${n})) r ON CONFLICT DO NOTHING`)).rowCount ?? 0
      log(`store: ${done + n} of ${rows} rows inserted, ${((performance.now() - started) / 1000).toFixed(0)} s`)
    }
    const inserted = performance.now()
    await c.query('VACUUM ANALYZE plants')
    await c.query('CHECKPOINT')
    return { stored, insert: (inserted - started) / 1000, vacuum: (performance.now() - inserted) / 1000 }
  })
}

export interface WalMark {
  // Bytes of WAL written since the cluster began, and checkpoints so far.
  bytes: number
  checkpoints: number
}

export async function walMark (url: string): Promise<WalMark> {
  return await withClient(url, async (c) => {
    const sql = 'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), \'0/0\')::text AS bytes, checkpoints_timed + checkpoints_req AS checkpoints FROM pg_stat_bgwriter'
    const row = (await c.query<{ bytes: string, checkpoints: string }>(sql)).rows[0]
    return { bytes: Number(row?.bytes), checkpoints: Number(row?.checkpoints) }
  })
}

// Sizes of the table and its primary key's index, for the report.
export async function storeSize (url: string): Promise<string> {
  return await withClient(url, async (c) => {
    const sql = 'SELECT pg_size_pretty(pg_table_size(\'plants\')) AS heap, pg_size_pretty(pg_relation_size(\'plants_pkey\')) AS pkey'
    const row = (await c.query<{ heap: string, pkey: string }>(sql)).rows[0]
    return `table ${row?.heap ?? '?'}, primary key ${row?.pkey ?? '?'}`
  })
}
