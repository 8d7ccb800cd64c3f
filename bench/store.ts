// The store run (BENCH_STORE=N): the service creating plants with random
// int64 ids into a store already holding N rows ("postgres-store") against
// the same service on an empty store ("postgres"), in alternating rounds on
// one throwaway PostgreSQL cluster configured as docker-compose.yml
// configures it (bench/store-cluster.ts). Printed: req/s, p99 and WAL bytes
// per create of each, and their ratios to the empty store.
import type { Phase, Round, Target } from './report.js'

export const STORE_TARGETS = ['postgres', 'postgres-store']

// Issue 45's targets, with N = 20 million: the full store at least this
// share of the empty store's req/s, and at most this many times its WAL.
const TARGETS = { reqPerSec: 0.9, wal: 2 }

// BENCH_STORE: the rows already stored; undefined when not a store run.
export function storeRows (): number | undefined {
  const value = process.env.BENCH_STORE
  if (value === undefined || value === '') return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) throw new Error('BENCH_STORE must be a positive integer (rows)')
  return n
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[mid] as number : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0)
// WAL bytes per create over all of a target's rounds, and per round.
const walPerCreate = (rounds: Round[]): number => sum(rounds.map((r) => r.wal?.bytes ?? 0)) / Math.max(1, sum(rounds.map((r) => r.responses)))
const walOfRound = (r: Round): number => (r.wal?.bytes ?? 0) / Math.max(1, r.responses)

export function printStore (phase: Phase, targets: Target[], rows: number): void {
  const empty = targets.find((t) => t.name === 'postgres')
  const full = targets.find((t) => t.name === 'postgres-store')
  if (empty === undefined || full === undefined) return
  const [e, f] = [phase.rounds.get(empty) ?? [], phase.rounds.get(full) ?? []]
  console.log(`### the store: ${rows.toLocaleString('en')} rows against an empty store, ${phase.connections} connections\n`)
  console.log('| store | req/s (median) | p99 ms (median) | WAL bytes per create (all rounds) | per round | checkpoints in rounds |')
  console.log('|---|---:|---:|---:|---|---:|')
  for (const [name, rounds] of [['empty', e], [`${rows.toLocaleString('en')} rows`, f]] as const) {
    console.log(`| ${name} | ${median(rounds.map((r) => r.reqPerSec)).toFixed(0)} | ${median(rounds.map((r) => r.p99)).toFixed(1)} | ` +
      `${walPerCreate(rounds).toFixed(0)} | ${rounds.map((r) => walOfRound(r).toFixed(0)).join(', ')} | ${sum(rounds.map((r) => r.wal?.checkpoints ?? 0))} |`)
  }
  const reqRatios = f.map((r, i) => r.reqPerSec / (e[i] as Round).reqPerSec)
  const reqRatio = median(reqRatios)
  const walRatio = walPerCreate(f) / walPerCreate(e)
  const p99Ratio = median(f.map((r) => r.p99)) / median(e.map((r) => r.p99))
  console.log(`\nfull / empty: req/s ${reqRatios.map((x) => x.toFixed(2)).join(', ')} (median ${reqRatio.toFixed(2)}x), ` +
    `p99 ${p99Ratio.toFixed(2)}x, WAL per create ${walRatio.toFixed(2)}x`)
  console.log(`${phase.connections} connections: req/s ${reqRatio.toFixed(2)}x (>= ${TARGETS.reqPerSec}) ${reqRatio >= TARGETS.reqPerSec ? 'ok' : 'MISSED'}; ` +
    `WAL per create ${walRatio.toFixed(2)}x (<= ${TARGETS.wal}) ${walRatio <= TARGETS.wal ? 'ok' : 'MISSED'}\n`)
}
