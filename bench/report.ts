import type { LoadResult } from './load.js'

// What npm run bench prints after its rounds, and the targets it checks.

export interface Target {
  // "postgres", "postgres-bare", "pglite+metrics", "echo", …
  name: string
  kind: 'service' | 'bare' | 'reference'
}

export interface Round extends LoadResult {
  // CPU µs per answer: the server process (PGlite's thread included), the
  // PostgreSQL server (all its processes; undefined on PGlite), and wrk.
  cpu: { server: number, database: number | undefined, load: number }
  // Highest resident set of the server seen so far, in bytes.
  rss: number
  // A service only: the slowest GET /health/live during the round, and the
  // probes not answered 200.
  liveMaxMs?: number
  liveFailed?: number
  // The store run only (bench/store.ts): WAL bytes the cluster wrote during
  // the round, and the checkpoints that began in it.
  wal?: { bytes: number, checkpoints: number }
}

export interface Phase {
  connections: number
  rounds: Map<Target, Round[]>
}

const TARGETS = {
  // The service against the bare batched create on the same database, at
  // the default log level (info) and at warn.
  postgresRatio: { postgres: 0.85, 'postgres-warn': 0.9 } as Record<string, number>,
  postgresP99Ms: { connections: 32, ms: 15 },
  pgliteP99Ms: { connections: 128, ms: 50 },
  liveMs: 1000,
  driftRssBytes: 150 * 1024 * 1024,
  // The last third of a drift run's rounds against the first, by median req/s.
  driftFloor: 0.95
}

export const CHECKS = `PostgreSQL service >= ${TARGETS.postgresRatio.postgres}x its bare create at info (the default) and ` +
  `>= ${TARGETS.postgresRatio['postgres-warn']}x at warn, at every connection count, p99 <= ${TARGETS.postgresP99Ms.ms} ms at ` +
  `${TARGETS.postgresP99Ms.connections}; PGlite p99 <= ${TARGETS.pgliteP99Ms.ms} ms at ` +
  `${TARGETS.pgliteP99Ms.connections}, /health/live within ${TARGETS.liveMs} ms; drift run: last third >= ` +
  `${TARGETS.driftFloor}x the first, RSS <= ${mb(TARGETS.driftRssBytes)}`

function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

export function mb (bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(0)} MB`
}

const backendOf = (target: Target): string => target.name.split(/[-+]/)[0] as string
const fixed = (n: number | undefined, digits = 0): string => n === undefined ? '—' : n.toFixed(digits)

function verdict (ok: boolean, text: string): string {
  return `${text} ${ok ? 'ok' : 'MISSED'}`
}

// The table of one connection count, then its targets met or missed.
export function printPhase (phase: Phase, targets: Target[], peakRss: (t: Target) => number): void {
  const bareOf = (t: Target): Target | undefined => targets.find((b) => b.kind === 'bare' && backendOf(b) === backendOf(t))
  const ratios = (t: Target): number[] => {
    const bare = bareOf(t)
    const mine = phase.rounds.get(t) ?? []
    const theirs = bare === undefined || bare === t ? [] : phase.rounds.get(bare) ?? []
    return theirs.length === 0 ? [] : mine.map((r, i) => r.reqPerSec / (theirs[i] as Round).reqPerSec)
  }
  console.log(`### ${phase.connections} connections\n`)
  console.log('| target | req/s (median) | p50 ms | p99 ms | ratio to bare, per round | ratio (median) | ' +
    'CPU µs/answer: server / PostgreSQL / wrk | peak RSS | slowest /health/live |')
  console.log('|---|---:|---:|---:|---|---:|---:|---:|---:|')
  const checks: string[] = []
  for (const target of targets) {
    const rounds = phase.rounds.get(target) ?? []
    const r = ratios(target)
    const p99 = median(rounds.map((x) => x.p99))
    const live = rounds.some((x) => x.liveMaxMs !== undefined) ? Math.max(...rounds.map((x) => x.liveMaxMs ?? 0)) : undefined
    const liveFailed = rounds.reduce((n, x) => n + (x.liveFailed ?? 0), 0)
    const database = rounds.every((x) => x.cpu.database !== undefined) ? median(rounds.map((x) => x.cpu.database as number)) : undefined
    console.log(`| ${target.name} | ${median(rounds.map((x) => x.reqPerSec)).toFixed(0)} | ${median(rounds.map((x) => x.p50)).toFixed(1)} | ${p99.toFixed(1)} | ` +
      `${r.map((x) => x.toFixed(2)).join(', ') || '—'} | ${r.length === 0 ? '—' : `${median(r).toFixed(2)}x`} | ` +
      `${fixed(median(rounds.map((x) => x.cpu.server)))} / ${fixed(database)} / ${fixed(median(rounds.map((x) => x.cpu.load)))} | ` +
      `${mb(peakRss(target))} | ${live === undefined ? '—' : `${live.toFixed(0)} ms${liveFailed > 0 ? ` (${liveFailed} failed)` : ''}`} |`)
    if (target.kind !== 'service' || target.name.includes('+')) continue
    const floor = TARGETS.postgresRatio[target.name]
    if (floor !== undefined) {
      const bare = bareOf(target)
      if (bare === undefined) {
        checks.push(`${target.name} ratio not measured (no postgres-bare target)`)
      } else {
        checks.push(verdict(median(r) >= floor, `${target.name} ${median(r).toFixed(2)}x (>= ${floor})`))
        // What the ratio stands for: the CPU one create costs the machine's
        // server side (the server and PostgreSQL), against the bare create's.
        const cost = (t: Target): number => median((phase.rounds.get(t) ?? []).map((x) => x.cpu.server + (x.cpu.database ?? 0)))
        checks.push(`server + PostgreSQL CPU ${cost(target).toFixed(0)} against ${cost(bare).toFixed(0)} µs per answer (${(cost(target) / cost(bare)).toFixed(2)}x)`)
      }
      if (phase.connections === TARGETS.postgresP99Ms.connections) {
        checks.push(verdict(p99 <= TARGETS.postgresP99Ms.ms, `${target.name} p99 ${p99.toFixed(1)} ms (<= ${TARGETS.postgresP99Ms.ms})`))
      }
    }
    if (target.name === 'pglite' && phase.connections === TARGETS.pgliteP99Ms.connections) {
      checks.push(verdict(p99 <= TARGETS.pgliteP99Ms.ms, `pglite p99 ${p99.toFixed(1)} ms (<= ${TARGETS.pgliteP99Ms.ms})`))
    }
    if (target.name === 'pglite' && live !== undefined) {
      checks.push(verdict(live <= TARGETS.liveMs && liveFailed === 0, `pglite /health/live ${live.toFixed(0)} ms (<= ${TARGETS.liveMs})`))
    }
  }
  // Metrics and tracing against the same service without them, round by round.
  for (const target of targets) {
    const plain = targets.find((p) => p.name === target.name.split('+')[0])
    if (plain === undefined || plain === target) continue
    const mine = phase.rounds.get(target) ?? []
    const theirs = phase.rounds.get(plain) ?? []
    const r = mine.map((x, i) => x.reqPerSec / (theirs[i] as Round).reqPerSec)
    console.log(`\n${target.name} / ${plain.name}: req/s ${r.map((x) => x.toFixed(2)).join(', ')} (median ${median(r).toFixed(2)}x)`)
  }
  if (checks.length > 0) console.log(`\n${phase.connections} connections: ${checks.join('; ')}`)
  console.log('')
}

// A long run at one connection count: req/s round by round, whether the
// service drifted down, and the memory it held. With the bare create in the
// same alternating rounds, drift is judged on the service/bare ratio, so a
// machine or database that slows down for both (a checkpoint, a neighbour)
// is not taken for the service's own drift; without it, on req/s.
export function printDrift (target: Target, targets: Target[], phases: Phase[], peakRss: number): void {
  const bare = targets.find((b) => b.kind === 'bare' && backendOf(b) === backendOf(target))
  for (const phase of phases) {
    const rounds = phase.rounds.get(target) ?? []
    const rates = rounds.map((r) => r.reqPerSec)
    const bareRounds = bare === undefined || bare === target ? undefined : phase.rounds.get(bare)
    const judged = bareRounds === undefined ? rates : rates.map((r, i) => r / (bareRounds[i] as Round).reqPerSec)
    const what = bareRounds === undefined ? 'req/s' : `req/s / ${(bare as Target).name}`
    const third = Math.max(1, Math.floor(judged.length / 3))
    const change = median(judged.slice(-third)) / median(judged.slice(0, third))
    // Least-squares slope over the round number, as % of the mean per round.
    const n = judged.length
    const meanX = (n - 1) / 2
    const meanY = judged.reduce((a, b) => a + b, 0) / n
    const slope = judged.reduce((sum, y, x) => sum + (x - meanX) * (y - meanY), 0) / Math.max(1e-9, judged.reduce((sum, _y, x) => sum + (x - meanX) ** 2, 0))
    const maxRss = Math.max(...rounds.map((r) => r.rss))
    console.log(`### drift: ${target.name}, ${phase.connections} connections, ${n} rounds\n`)
    console.log(`req/s per round: ${rates.map((r) => r.toFixed(0)).join(', ')}`)
    if (bareRounds !== undefined) console.log(`${what} per round: ${judged.map((r) => r.toFixed(2)).join(', ')}`)
    console.log(`p99 ms per round: ${rounds.map((r) => r.p99).join(', ')}`)
    console.log(`RSS per round: ${rounds.map((r) => mb(r.rss)).join(', ')}`)
    console.log(`last third / first third (median ${what}): ${change.toFixed(3)}; slope ${(100 * slope / meanY).toFixed(2)}% per round; ` +
      `spread (max/min) ${(Math.max(...judged) / Math.min(...judged)).toFixed(2)}`)
    if (target.kind !== 'service') continue
    console.log(`${verdict(change >= TARGETS.driftFloor, `no downward drift (${what}, last/first ${change.toFixed(3)} >= ${TARGETS.driftFloor})`)}; ` +
      `${verdict(Math.max(maxRss, peakRss) <= TARGETS.driftRssBytes, `RSS max ${mb(maxRss)}, peak (VmHWM) ${mb(peakRss)} (<= ${mb(TARGETS.driftRssBytes)})`)}\n`)
  }
}
