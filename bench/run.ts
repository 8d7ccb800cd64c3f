// npm run bench: the service (built in dist/) against a bare batched create
// (bench/bare-create.ts), on PostgreSQL and on embedded PGlite, all on
// 127.0.0.1, at each connection count in alternating rounds so that drift
// on the machine hits every target alike. Every request creates a plant
// with a new id; afterwards each target's rows stored must equal its 200s.
//
// Environment:
//   DATABASE_URL or TEST_DATABASE_URL  a PostgreSQL server on which a fresh
//       database per target is created and dropped (without one only PGlite)
//   BENCH_CONNECTIONS (32,128)  connection counts, each a phase of its own
//   BENCH_ROUNDS (5), BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (3)
//   BENCH_TARGETS  e.g. "postgres-bare,postgres" (also "echo": Fastify
//       answering without a database, the old yardstick)
//   BENCH_PROFILE=1  --cpu-prof profiles of each server in bench/profiles/NAME-TIME/
//       (read with bench/profile-summary.ts; its figures are not representative)
//   BENCH_OPERATING=1  also each database's service with metrics on and with
//       spans exported to a local OTLP sink ("postgres+metrics", …)
//   BENCH_NODE_FLAGS  also each database's service with these NODE_OPTIONS
//       ("postgres+flags"), e.g. "--max-semi-space-size=8"
//   BENCH_DRIFT=1  the drift run instead: the service on PostgreSQL and its
//       bare create (or BENCH_TARGETS) at 128 connections, each for
//       BENCH_DRIFT_SECONDS (300) in alternating rounds of BENCH_SECONDS
//       (30); req/s and its ratio to the bare round by round, and RSS.
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { runToEnd, startServer, type Server } from './processes.js'
import { cpuSeconds, cpuSecondsOf } from './cpu.js'
import { createLoad, type Load, type LoadResult } from './load.js'
import { createPgliteDatabase, createPostgresDatabase, type BenchDatabase } from './databases.js'
import { startOtlpSink } from './otlp-sink.js'
import { startLivenessProbe } from '../test/support/liveness-probe.js'
import { CHECKS, mb, printDrift, printPhase, type Phase, type Round, type Target } from './report.js'

const intEnv = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`)
  return value
}
const drift = process.env.BENCH_DRIFT === '1'
const connectionCounts = (process.env.BENCH_CONNECTIONS ?? (drift ? '128' : '32,128')).split(',').map((c) => {
  const n = Number(c)
  if (!Number.isInteger(n) || n < 1) throw new Error('BENCH_CONNECTIONS must list positive integers')
  return n
})
const seconds = intEnv('BENCH_SECONDS', drift ? 30 : 10)
const rounds = drift ? Math.max(1, Math.round(intEnv('BENCH_DRIFT_SECONDS', 300) / seconds)) : intEnv('BENCH_ROUNDS', 5)
const warmupSeconds = intEnv('BENCH_WARMUP_SECONDS', 3)
const profileDir = process.env.BENCH_PROFILE === '1' ? join('bench', 'profiles') : undefined
const adminUrl = process.env.DATABASE_URL ?? process.env.TEST_DATABASE_URL
const only = process.env.BENCH_TARGETS?.split(',').map((s) => s.trim()) ?? (drift ? ['postgres-bare', 'postgres'] : undefined)
const operating = process.env.BENCH_OPERATING === '1'
// How often /health/live is asked while a service is loaded.
const LIVENESS_INTERVAL_MS = 200

interface Running extends Target {
  server: Server
  database?: BenchDatabase
  loads: Map<number, Load>
  // Requests per second last seen at each connection count: sizes the next round.
  rate: Map<number, number>
  // 200 answers over every warm-up and round: rows stored must equal it.
  ok: number
  other: Record<string, number>
  errors: number
}

const wanted = (name: string): boolean => only === undefined ? name !== 'echo' : only.includes(name)

function record (target: Running, result: LoadResult): void {
  target.ok += result.ok
  target.errors += result.errors
  for (const [code, count] of Object.entries(result.statusCounts)) {
    if (code !== '200') target.other[code] = (target.other[code] ?? 0) + count
  }
}

async function warmUp (target: Running, connections: number): Promise<void> {
  const load = target.loads.get(connections) as Load
  const until = performance.now() + warmupSeconds * 1000
  do {
    const result = await load.run(Math.max(1000, connections * 25))
    record(target, result)
    target.rate.set(connections, result.reqPerSec)
  } while (performance.now() < until)
}

// One round of one target: a fixed number of requests (sized from the last
// rate) and every answer waited for, with CPU from /proc around it.
async function round (target: Running, connections: number): Promise<Round> {
  const pid = target.server.child.pid as number
  const probe = target.kind === 'service' ? startLivenessProbe(target.server.url, LIVENESS_INTERVAL_MS) : undefined
  const before = { server: cpuSeconds(pid), database: cpuSecondsOf('postgres'), load: cpuSeconds(process.pid) }
  const load = target.loads.get(connections) as Load
  const result = await load.run(Math.max(connections, Math.ceil((target.rate.get(connections) ?? 1000) * seconds)))
  const perAnswer = (now: number, then: number): number => ((now - then) / result.responses) * 1e6
  const cpu = {
    server: perAnswer(cpuSeconds(pid), before.server),
    database: target.database?.kind === 'postgres' ? perAnswer(cpuSecondsOf('postgres'), before.database) : undefined,
    load: perAnswer(cpuSeconds(process.pid), before.load)
  }
  const probes = await probe?.stop()
  record(target, result)
  target.rate.set(connections, result.reqPerSec)
  return {
    ...result,
    cpu,
    rss: target.server.maxRss(),
    ...(probes === undefined
      ? {}
      : { liveMaxMs: Math.max(0, ...probes.map((p) => p.ms)), liveFailed: probes.filter((p) => p.status !== 200).length })
  }
}

async function main (): Promise<number> {
  const token = randomBytes(18).toString('base64url')
  const serviceEnv = { API_TOKENS: token, LOG_LEVEL: 'warn', NODE_ENV: 'production' }
  const profileArgs = (name: string): string[] => profileDir === undefined
    ? []
    // A folder per server: every thread writes a profile of its own (tsx's
    // loader thread, PGlite's thread), so the files are not named.
    : ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, `${name}-${Date.now()}`)}`]
  if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true })

  const targets: Running[] = []
  const databases: BenchDatabase[] = []
  const sink = operating ? await startOtlpSink() : undefined
  const variants: Array<[string, Record<string, string>]> = [['', {}]]
  if (sink !== undefined) {
    variants.push(['+metrics', { METRICS_PORT: '0' }])
    variants.push(['+tracing', { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url }])
  }
  // The same service with other Node flags, in the same rounds (e.g. heap sizes).
  const nodeFlags = process.env.BENCH_NODE_FLAGS
  if (nodeFlags !== undefined && nodeFlags !== '') variants.push(['+flags', { NODE_OPTIONS: nodeFlags }])
  const add = (name: string, kind: Target['kind'], server: Server, database?: BenchDatabase): void => {
    const loads = new Map(connectionCounts.map((c) => [c, createLoad(server.url, token, c)]))
    targets.push({ name, kind, server, loads, rate: new Map(), ok: 0, other: {}, errors: 0, ...(database === undefined ? {} : { database }) })
  }
  // A database of its own per target, its table made by the service's migrations.
  const database = async (backend: 'postgres' | 'pglite'): Promise<BenchDatabase> => {
    const db = backend === 'postgres' ? await createPostgresDatabase(adminUrl as string) : createPgliteDatabase()
    databases.push(db)
    const migrated = await runToEnd(`${backend} migrate`, ['dist/src/migrate.js'], { ...serviceEnv, ...db.env })
    if (backend === 'pglite') console.log(`pglite: initdb + migrations (npm run migrate) took ${migrated.seconds.toFixed(1)} s, peak RSS ${mb(migrated.peakRss)}`)
    return db
  }
  let failed = false
  try {
    if (wanted('echo')) add('echo', 'reference', await startServer('echo', ['--import', 'tsx', 'bench/baseline.ts'], {}))
    const backends = (['postgres', 'pglite'] as const).filter((b) => b === 'pglite' || (adminUrl !== undefined && adminUrl !== ''))
    for (const backend of backends) {
      const bare = `${backend}-bare`
      if (wanted(bare)) {
        const db = await database(backend)
        add(bare, 'bare', await startServer(bare, [...profileArgs(bare), '--import', 'tsx', 'bench/bare-create.ts'], db.env), db)
      }
      for (const [suffix, env] of variants) {
        const name = `${backend}${suffix}`
        if (!wanted(name) && !(suffix !== '' && wanted(backend))) continue
        const db = await database(backend)
        add(name, 'service', await startServer(name, [...profileArgs(name), 'dist/src/server.js'], { ...serviceEnv, ...env, ...db.env }), db)
      }
    }
    if (targets.length === 0) throw new Error('no bench target selected')

    console.log(`${targets.map((t) => t.name).join(', ')}; warm-up ${warmupSeconds} s, ${rounds} rounds of ~${seconds} s per target and connection count, node ${process.version}`)
    const phases: Phase[] = []
    for (const connections of connectionCounts) {
      const phase: Phase = { connections, rounds: new Map() }
      phases.push(phase)
      for (const target of targets) await warmUp(target, connections)
      for (let n = 1; n <= rounds; n++) {
        // The order turns each round, so what one target leaves behind (a
        // checkpoint, autovacuum) does not always fall on the same next one.
        const shift = (n - 1) % targets.length
        for (const target of [...targets.slice(shift), ...targets.slice(0, shift)]) {
          const result = await round(target, connections)
          phase.rounds.set(target, [...(phase.rounds.get(target) ?? []), result])
          const others = Object.entries(result.statusCounts).filter(([c]) => c !== '200').map(([c, k]) => `${c}:${k}`).join(' ')
          console.log(`${connections} conn round ${n} ${target.name.padEnd(14)} ${result.reqPerSec.toFixed(0).padStart(6)} req/s  ` +
            `p50 ${String(result.p50).padStart(3)} ms  p99 ${String(result.p99).padStart(3)} ms  RSS ${mb(result.rss)}` +
            `${result.liveMaxMs === undefined ? '' : `  live max ${result.liveMaxMs.toFixed(0)} ms`}` +
            `${others === '' ? '' : `  non-200 ${others}`}${result.errors > 0 ? `  errors ${result.errors}` : ''}`)
        }
      }
    }

    console.log('')
    if (drift) {
      for (const target of targets) printDrift(target, targets, phases, target.server.peakRss())
    } else {
      for (const phase of phases) printPhase(phase, targets, (t) => (t as Running).server.peakRss())
      if (sink !== undefined) console.log(`OTLP sink received ${sink.exports()} exports`)
    }

    // Every 200 must be a stored row, and nothing else may be.
    for (const target of targets) await target.server.stop()
    for (const target of targets) {
      if (target.database === undefined) continue
      const rows = await target.database.countRows()
      const others = Object.entries(target.other).map(([c, n]) => `${c}:${n}`).join(' ') || 'none'
      const same = rows === target.ok
      if (!same) failed = true
      console.log(`${same ? '' : 'FAIL '}${target.name}: ${rows} rows stored ${same ? '=' : 'but'} ${target.ok} answers 200 (other answers: ${others}, connection errors: ${target.errors})`)
    }
    console.log(`\ntargets: ${CHECKS}`)
  } finally {
    for (const target of targets) await target.server.stop().catch(() => {})
    for (const db of databases) await db.drop().catch((err: unknown) => console.error('could not drop a bench database:', err))
    await sink?.close()
  }
  return failed ? 1 : 0
}

process.exitCode = await main()
