// npm run bench: the service (built in dist/) on PostgreSQL and on embedded
// PGlite against a bare Fastify baseline, all on 127.0.0.1, loaded in
// alternating rounds so that drift on the machine hits every target alike.
//
// Environment: DATABASE_URL or TEST_DATABASE_URL (a PostgreSQL server on
// which a fresh database is created and dropped; without one only PGlite
// runs), BENCH_CONNECTIONS (32), BENCH_ROUNDS (3), BENCH_SECONDS (10),
// BENCH_WARMUP_SECONDS (3), BENCH_TARGETS (e.g. "baseline,pglite"),
// BENCH_PROFILE=1 (write a --cpu-prof profile of each service to
// bench/profiles/; the figures of a profiled run are not representative),
// BENCH_OPERATING=1 (also each database's service with metrics on, and
// with spans exported to a local OTLP sink, e.g. "postgres+metrics", each
// on a database of its own; prints their req/s ratio to the plain one).
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { runToEnd, startServer, type Server } from './processes.js'
import { cpuSeconds, cpuSecondsOf } from './cpu.js'
import { createLoad, type Load, type LoadResult } from './load.js'
import { createPgliteDatabase, createPostgresDatabase, type BenchDatabase } from './databases.js'
import { startOtlpSink } from './otlp-sink.js'

const intEnv = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`)
  return value
}
const connections = intEnv('BENCH_CONNECTIONS', 32)
const rounds = intEnv('BENCH_ROUNDS', 3)
const seconds = intEnv('BENCH_SECONDS', 10)
const warmupSeconds = intEnv('BENCH_WARMUP_SECONDS', 3)
const profileDir = process.env.BENCH_PROFILE === '1' ? join('bench', 'profiles') : undefined
const adminUrl = process.env.DATABASE_URL ?? process.env.TEST_DATABASE_URL
const only = process.env.BENCH_TARGETS?.split(',').map((s) => s.trim())
const operating = process.env.BENCH_OPERATING === '1'

const TARGETS = { postgres: { reqRatio: 0.6, p99Ms: 15 }, pglite: { reqRatio: 0.3 }, rssBytes: 200 * 1024 * 1024 }

interface Target {
  name: string
  server: Server
  load: Load
  database?: BenchDatabase
  // Requests per second last seen: sizes the next round.
  rate: number
  rounds: LoadResult[]
  // CPU microseconds per answer in each round: the server process, the
  // PostgreSQL server (all its processes), and this process (autocannon).
  cpu: Array<{ server: number, postgres: number, load: number }>
  // 200 answers over warm-up and rounds: rows stored must equal it.
  ok: number
  other: Record<string, number>
  errors: number
}

const wanted = (name: string): boolean => only === undefined || only.includes(name)
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}
const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MB`
const pad = (text: string | number, width: number): string => String(text).padStart(width)

function record (target: Target, result: LoadResult): void {
  target.ok += result.ok
  target.errors += result.errors
  for (const [code, count] of Object.entries(result.statusCounts)) {
    if (code !== '200') target.other[code] = (target.other[code] ?? 0) + count
  }
}

async function warmUp (target: Target): Promise<void> {
  const chunk = Math.max(1000, connections * 25)
  const until = performance.now() + warmupSeconds * 1000
  do {
    const result = await target.load.run(chunk)
    record(target, result)
    target.rate = result.reqPerSec
  } while (performance.now() < until)
}

async function main (): Promise<number> {
  const token = randomBytes(18).toString('base64url')
  const serviceEnv = { API_TOKENS: token, LOG_LEVEL: 'warn', NODE_ENV: 'production' }
  const profileArgs = (name: string): string[] => profileDir === undefined
    ? []
    : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`]
  if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true })

  const targets: Target[] = []
  const add = (name: string, server: Server, database?: BenchDatabase): void => {
    targets.push({
      name,
      server,
      load: createLoad(server.url, token, connections),
      rate: 0,
      rounds: [],
      cpu: [],
      ok: 0,
      other: {},
      errors: 0,
      ...(database === undefined ? {} : { database })
    })
  }
  const databases: BenchDatabase[] = []
  const sink = operating ? await startOtlpSink() : undefined
  // The plain service, then (BENCH_OPERATING=1) the same with metrics on and
  // with spans exported.
  const variants: Array<[string, Record<string, string>]> = [['', {}]]
  if (sink !== undefined) {
    variants.push(['+metrics', { METRICS_PORT: '0' }])
    variants.push(['+tracing', { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url }])
  }
  let failed = false
  try {
    if (wanted('baseline')) add('baseline', await startServer('baseline', ['--import', 'tsx', 'bench/baseline.ts'], {}))
    if (wanted('postgres') && adminUrl !== undefined && adminUrl !== '') {
      for (const [suffix, env] of variants) {
        const database = await createPostgresDatabase(adminUrl)
        databases.push(database)
        const name = `postgres${suffix}`
        add(name, await startServer(name, [...profileArgs(name), 'dist/src/server.js'], { ...serviceEnv, ...env, ...database.env }), database)
      }
    }
    if (wanted('pglite')) {
      for (const [suffix, env] of variants) {
        const database = createPgliteDatabase()
        databases.push(database)
        // initdb runs once per data directory and needs far more memory than
        // serving does (a second PostgreSQL instance in WebAssembly): create
        // the database first, as a deployment would with npm run migrate.
        const first = await runToEnd('pglite migrate', ['dist/src/migrate.js'], { ...serviceEnv, ...database.env })
        console.log(`pglite: initdb + migrations (npm run migrate) took ${first.seconds.toFixed(1)} s, peak RSS ${mb(first.peakRss)}`)
        const name = `pglite${suffix}`
        add(name, await startServer(name, [...profileArgs(name), 'dist/src/server.js'], { ...serviceEnv, ...env, ...database.env }), database)
      }
    }

    console.log(`${connections} connections, warm-up ${warmupSeconds} s, ${rounds} rounds of ~${seconds} s per target, node ${process.version}`)
    for (const target of targets) await warmUp(target)

    for (let round = 1; round <= rounds; round++) {
      for (const target of targets) {
        const pid = target.server.child.pid as number
        const before = { server: cpuSeconds(pid), postgres: cpuSecondsOf('postgres'), load: cpuSeconds(process.pid) }
        const result = await target.load.run(Math.max(connections, Math.ceil(target.rate * seconds)))
        const perAnswer = (now: number, then: number): number => ((now - then) / result.responses) * 1e6
        target.cpu.push({
          server: perAnswer(cpuSeconds(pid), before.server),
          postgres: perAnswer(cpuSecondsOf('postgres'), before.postgres),
          load: perAnswer(cpuSeconds(process.pid), before.load)
        })
        record(target, result)
        target.rounds.push(result)
        target.rate = result.reqPerSec
        const others = Object.entries(result.statusCounts).filter(([c]) => c !== '200').map(([c, n]) => `${c}:${n}`).join(' ')
        console.log(`round ${round} ${target.name.padEnd(8)} ${pad(result.reqPerSec.toFixed(0), 6)} req/s  p50 ${pad(result.p50, 3)} ms  p99 ${pad(result.p99, 3)} ms  ` +
          `${result.responses} answers in ${result.seconds.toFixed(1)} s${others === '' ? '' : `  non-200 ${others}`}${result.errors > 0 ? `  errors ${result.errors}` : ''}`)
      }
    }

    const baseline = targets.find((t) => t.name === 'baseline')
    const ratiosOf = (target: Target): number[] => baseline === undefined || target === baseline
      ? []
      : target.rounds.map((r, i) => r.reqPerSec / (baseline.rounds[i] as LoadResult).reqPerSec)
    console.log('\n| target | req/s (median) | p50 ms | p99 ms | ratio per round | ratio (median) | max RSS under load | peak RSS (VmHWM) | CPU µs/answer: server / PostgreSQL / autocannon |')
    console.log('|---|---:|---:|---:|---|---:|---:|---:|---:|')
    for (const target of targets) {
      const ratios = ratiosOf(target)
      console.log(`| ${target.name} | ${median(target.rounds.map((r) => r.reqPerSec)).toFixed(0)} | ${median(target.rounds.map((r) => r.p50))} | ` +
        `${median(target.rounds.map((r) => r.p99))} | ${ratios.map((r) => r.toFixed(2)).join(', ') || '—'} | ` +
        `${ratios.length === 0 ? '—' : median(ratios).toFixed(2) + 'x'} | ${mb(target.server.maxRss())} | ${mb(target.server.peakRss())} | ` +
        `${median(target.cpu.map((c) => c.server)).toFixed(0)} / ${target.name === 'postgres' ? median(target.cpu.map((c) => c.postgres)).toFixed(0) : '—'} / ${median(target.cpu.map((c) => c.load)).toFixed(0)} |`)
    }
    console.log('')
    // Metrics and tracing against the same service without them, round by round.
    for (const target of targets) {
      const plain = targets.find((p) => p.name === target.name.split('+')[0])
      if (plain === undefined || plain === target) continue
      const ratios = target.rounds.map((r, i) => r.reqPerSec / (plain.rounds[i] as LoadResult).reqPerSec)
      console.log(`${target.name} / ${plain.name}: req/s ${ratios.map((r) => r.toFixed(2)).join(', ')} (median ${median(ratios).toFixed(2)}x), ` +
        `p99 ${median(target.rounds.map((r) => r.p99))} vs ${median(plain.rounds.map((r) => r.p99))} ms`)
    }
    if (sink !== undefined) console.log(`OTLP sink received ${sink.exports()} exports`)
    console.log('')
    for (const target of targets) {
      const ratios = ratiosOf(target)
      if (ratios.length > 0 && !target.name.includes('+')) checkTargets(target, median(ratios))
    }

    // Every 200 must be a stored row, and nothing else may be.
    for (const target of targets) await target.server.stop()
    for (const target of targets) {
      if (target.database === undefined) continue
      const rows = await target.database.countRows()
      const others = Object.entries(target.other).map(([c, n]) => `${c}:${n}`).join(' ') || 'none'
      if (rows === target.ok) {
        console.log(`${target.name}: ${rows} rows stored = ${target.ok} answers 200 (other answers: ${others}, connection errors: ${target.errors})`)
      } else {
        failed = true
        console.error(`FAIL ${target.name}: ${rows} rows stored but ${target.ok} answers 200 (other answers: ${others}, connection errors: ${target.errors})`)
      }
    }
  } finally {
    for (const target of targets) await target.server.stop().catch(() => {})
    for (const database of databases) await database.drop().catch((err: unknown) => console.error('could not drop a bench database:', err))
    await sink?.close()
  }
  return failed ? 1 : 0
}

function checkTargets (target: Target, ratio: number): void {
  const checks: Array<{ ok: boolean, text: string }> = []
  const p99 = median(target.rounds.map((r) => r.p99))
  const wantRatio = target.name === 'postgres' ? TARGETS.postgres.reqRatio : TARGETS.pglite.reqRatio
  checks.push({ ok: ratio >= wantRatio, text: `ratio ${ratio.toFixed(2)} (>= ${wantRatio})` })
  if (target.name === 'postgres') checks.push({ ok: p99 <= TARGETS.postgres.p99Ms, text: `p99 ${p99} ms (<= ${TARGETS.postgres.p99Ms})` })
  const rss = target.server.peakRss()
  checks.push({ ok: rss <= TARGETS.rssBytes, text: `peak RSS ${mb(rss)} (<= ${mb(TARGETS.rssBytes)})` })
  const met = checks.every((c) => c.ok)
  console.log(`${target.name} targets ${met ? 'met' : 'MISSED'}: ${checks.map((c) => `${c.text} ${c.ok ? 'ok' : 'MISSED'}`).join('; ')}`)
}

process.exitCode = await main()
