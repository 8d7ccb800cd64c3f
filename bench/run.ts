// npm run bench: the service (built in dist/) against a bare batched create
// (bench/bare-create.ts), on PostgreSQL and on embedded PGlite, all on
// 127.0.0.1, at each connection count in alternating rounds so that drift
// on the machine hits every target alike. Each round is a fresh process of
// its target, warmed up first: one process of the same build can run
// markedly faster or slower than the next for its whole life (where V8's
// collector settles, bench/RESULTS.md), so rounds sample processes too.
// The service runs at the default log level, info ("postgres", "pglite"),
// and on PostgreSQL also at warn
// ("postgres-warn"); its log goes down a pipe to a reader of its own, as a
// container engine reads a service's log (bench/processes.ts).
// The load is wrk (bench/load.ts, which must be installed: Debian's wrk).
// Every request creates a plant with a new id; afterwards each target's
// rows stored must equal its 200s.
//
// Environment:
//   DATABASE_URL or TEST_DATABASE_URL  a PostgreSQL server on which a fresh
//       database per target is created and dropped (without one only PGlite)
//   BENCH_CONNECTIONS (32,128)  connection counts, each a phase of its own
//   BENCH_ROUNDS (5), BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (3)
//   BENCH_SAME_PROCESS=1  one process per target for every round (each
//       warmed up once per connection count), as the drift run always is
//   BENCH_TARGETS  e.g. "postgres-bare,postgres,postgres-warn" (also
//       "pglite-warn", and "echo": Fastify answering without a database,
//       the old yardstick)
//   BENCH_PROFILE=1  --cpu-prof profiles of each server in bench/profiles/NAME-TIME/
//       (with BENCH_SAME_PROCESS=1, one profile per target whose answers the
//       bench prints; otherwise one per round, its answers not printed)
//       (read with bench/profile-summary.ts; its figures are not representative)
//       "postgres-jwt": the service with AUTH_ISSUER, its load sending one
//       cached JWT access token instead of a static token (in the default
//       set beside "postgres"; "pglite-jwt" on request)
//   BENCH_OPERATING=1  also each database's service with metrics on and with
//       spans exported to a local OTLP sink ("postgres+metrics", …)
//   BENCH_NODE_FLAGS  also each database's service with these NODE_OPTIONS
//       ("postgres+flags"), e.g. "--max-semi-space-size=8"
//   BENCH_SERVICES  also other builds of the service, "name=path/to/server.js,…"
//       ("postgres+name"), e.g. an earlier commit built elsewhere
//   BENCH_DRIFT=1  the drift run instead: the service on PostgreSQL and its
//       bare create (or BENCH_TARGETS) at 128 connections, each for
//       BENCH_DRIFT_SECONDS (300) in alternating rounds of BENCH_SECONDS
//       (30); req/s and its ratio to the bare round by round, and RSS.
//   BENCH_STORE=N  the store run instead (bench/store.ts): the service on a
//       store already holding N rows with random ids against an empty one,
//       random int64 ids, at BENCH_CONNECTIONS (32), BENCH_ROUNDS (5) of
//       BENCH_SECONDS (30), on a throwaway PostgreSQL 15 cluster on
//       BENCH_STORE_PORT (5499) with BENCH_STORE_SETTINGS (compose: those of
//       docker-compose.yml's db; default: PostgreSQL's; or name=value,…)
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { runToEnd, startServer, type Server } from './processes.js'
import { cpuSeconds, cpuSecondsOf } from './cpu.js'
import { checkWrk, createLoad, type Load, type LoadResult } from './load.js'
import { createPgliteDatabase, createPostgresDatabase, type BenchDatabase } from './databases.js'
import { startOtlpSink } from './otlp-sink.js'
import { startBenchIssuer, type BenchIssuer } from './jwt-issuer.js'
import { startLivenessProbe } from '../test/support/liveness-probe.js'
import { CHECKS, mb, printDrift, printPhase, type Phase, type Round, type Target } from './report.js'
import { printStore, STORE_TARGETS, storeRows } from './store.js'
import { chosenSettings, startStoreCluster, type StoreCluster } from './store-cluster.js'
import { loadStore, storeSize, walMark, type WalMark } from './store-rows.js'

const intEnv = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`)
  return value
}
const drift = process.env.BENCH_DRIFT === '1'
const store = storeRows()
const freshProcessEachRound = !drift && process.env.BENCH_SAME_PROCESS !== '1'
const connectionCounts = (process.env.BENCH_CONNECTIONS ?? (drift ? '128' : store !== undefined ? '32' : '32,128')).split(',').map((c) => {
  const n = Number(c)
  if (!Number.isInteger(n) || n < 1) throw new Error('BENCH_CONNECTIONS must list positive integers')
  return n
})
const seconds = intEnv('BENCH_SECONDS', drift || store !== undefined ? 30 : 10)
const rounds = drift ? Math.max(1, Math.round(intEnv('BENCH_DRIFT_SECONDS', 300) / seconds)) : intEnv('BENCH_ROUNDS', 5)
const warmupSeconds = intEnv('BENCH_WARMUP_SECONDS', 3)
const profileDir = process.env.BENCH_PROFILE === '1' ? join('bench', 'profiles') : undefined
// The store run's own cluster, once started.
let cluster: StoreCluster | undefined
let adminUrl = process.env.DATABASE_URL ?? process.env.TEST_DATABASE_URL
const only = store !== undefined ? STORE_TARGETS : process.env.BENCH_TARGETS?.split(',').map((s) => s.trim()) ?? (drift ? ['postgres-bare', 'postgres'] : undefined)
const operating = process.env.BENCH_OPERATING === '1'
// How often /health/live is asked while a service is loaded.
const LIVENESS_INTERVAL_MS = 200

interface Running extends Target {
  // The process running now; every one started for this target, for its
  // log and its peak memory; how to start another.
  server: Server
  servers: Server[]
  start: () => Promise<Server>
  // Whether a round has run on the current process.
  used: boolean
  database?: BenchDatabase
  // 200 answers over every warm-up and round, and resent requests found
  // stored by their first sending: rows stored must equal it.
  ok: number
  other: Record<string, number>
  errors: number
  resent: number
  // The bearer token its load sends, when not the bench's static one.
  token?: string
  // Rows its database held before the first round (the store run's).
  stored?: number
}

// The highest resident set any of the target's processes reached.
const peakRss = (target: Running): number => Math.max(...target.servers.map((server) => server.peakRss()))

const wanted = (name: string): boolean => only === undefined ? !['echo', 'pglite-warn', 'pglite-jwt'].includes(name) : only.includes(name)

function record (target: Running, result: LoadResult): void {
  target.ok += result.ok + result.storedEarlier
  target.errors += result.errors
  target.resent += result.resent
  for (const [code, count] of Object.entries(result.statusCounts)) {
    if (code !== '200') target.other[code] = (target.other[code] ?? 0) + count
  }
}

// The bench's one API token, given to every service it starts.
const token = randomBytes(18).toString('base64url')

// wrk against the target's current process; random int64 ids in the store run.
const load = (target: Running, connections: number): Load => createLoad(target.server.url, target.token ?? token, connections, store !== undefined)

async function warmUp (target: Running, connections: number): Promise<void> {
  record(target, await load(target, connections).run(warmupSeconds))
}

// A new process of the target, in place of the one that ran a round, on
// the same database (so rows stored still add up to the 200s).
async function freshProcess (target: Running): Promise<void> {
  if (!target.used) return
  await target.server.stop()
  target.server = await target.start()
  target.servers.push(target.server)
  target.used = false
}

// One round of one target: BENCH_SECONDS of load, the requests still in
// flight at the end sent again, with CPU from /proc around it.
async function round (target: Running, connections: number): Promise<Round> {
  const pid = target.server.child.pid as number
  const probe = target.kind === 'service' ? startLivenessProbe(target.server.url, LIVENESS_INTERVAL_MS) : undefined
  const before = { server: cpuSeconds(pid), database: cpuSecondsOf('postgres'), wal: await walNow() }
  const result = await load(target, connections).run(seconds)
  const wal = await walNow()
  const perAnswer = (now: number, then: number): number => ((now - then) / result.responses) * 1e6
  const cpu = {
    server: perAnswer(cpuSeconds(pid), before.server),
    database: target.database?.kind === 'postgres' ? perAnswer(cpuSecondsOf('postgres'), before.database) : undefined,
    load: perAnswer(result.loadCpuSeconds, 0)
  }
  const probes = await probe?.stop()
  record(target, result)
  return {
    ...result,
    cpu,
    rss: target.server.maxRss(),
    ...(wal === undefined || before.wal === undefined ? {} : { wal: { bytes: wal.bytes - before.wal.bytes, checkpoints: wal.checkpoints - before.wal.checkpoints } }),
    ...(probes === undefined
      ? {}
      : { liveMaxMs: Math.max(0, ...probes.map((p) => p.ms)), liveFailed: probes.filter((p) => p.status !== 200).length })
  }
}

// The store run's cluster's WAL position and checkpoints so far.
const walNow = async (): Promise<WalMark | undefined> => cluster === undefined ? undefined : await walMark(cluster.url)

// Every connection count in turn, its rounds alternating between the
// targets.
async function runPhases (targets: Running[]): Promise<Phase[]> {
  const phases: Phase[] = []
  for (const connections of connectionCounts) {
    const phase: Phase = { connections, rounds: new Map() }
    phases.push(phase)
    if (!freshProcessEachRound) for (const target of targets) await warmUp(target, connections)
    for (let n = 1; n <= rounds; n++) {
      // The order turns each round, so what one target leaves behind (a
      // checkpoint, autovacuum) does not always fall on the same next one.
      const shift = (n - 1) % targets.length
      for (const target of [...targets.slice(shift), ...targets.slice(0, shift)]) {
        if (freshProcessEachRound) {
          await freshProcess(target)
          await warmUp(target, connections)
        }
        target.used = true
        const result = await round(target, connections)
        phase.rounds.set(target, [...(phase.rounds.get(target) ?? []), result])
        printRound(connections, n, target, result)
      }
    }
  }
  return phases
}

function printRound (connections: number, n: number, target: Running, result: Round): void {
  const others = Object.entries(result.statusCounts).filter(([c]) => c !== '200').map(([c, k]) => `${c}:${k}`).join(' ')
  console.log(`${connections} conn round ${n} ${target.name.padEnd(14)} ${result.reqPerSec.toFixed(0).padStart(6)} req/s  ` +
    `p50 ${result.p50.toFixed(1).padStart(5)} ms  p99 ${result.p99.toFixed(1).padStart(5)} ms  CPU µs/answer ${result.cpu.server.toFixed(0)}  RSS ${mb(result.rss)}` +
    `${result.liveMaxMs === undefined ? '' : `  live max ${result.liveMaxMs.toFixed(0)} ms`}` +
    `${others === '' ? '' : `  non-200 ${others}`}${result.errors > 0 ? `  errors ${result.errors}` : ''}`)
}

// Whether each target's rows stored equal its 200 answers; prints both.
async function rowsMatchAnswers (targets: Running[]): Promise<boolean> {
  let all = true
  for (const target of targets) {
    if (target.database === undefined) continue
    const rows = await target.database.countRows() - (target.stored ?? 0)
    const others = Object.entries(target.other).map(([c, n]) => `${c}:${n}`).join(' ') || 'none'
    const same = rows === target.ok
    if (!same) all = false
    console.log(`${same ? '' : 'FAIL '}${target.name}: ${rows} rows stored${target.stored === undefined ? '' : ' by the bench'} ${same ? '=' : 'but'} ${target.ok} answers 200 ` +
      `(${target.resent} in flight when wrk stopped, sent again; other answers: ${others}, connection errors: ${target.errors})`)
  }
  return all
}

// The bytes each service logged, over all its processes.
async function printLogBytes (targets: Running[]): Promise<void> {
  for (const target of targets) {
    const logs = await Promise.all(target.servers.map(async (server) => await server.logBytes()))
    if (logs.includes(undefined)) continue
    const bytes = (logs as number[]).reduce((sum, b) => sum + b, 0)
    console.log(`${target.name}: log ${mb(bytes)}, ${(bytes / Math.max(1, target.ok)).toFixed(0)} bytes per answer 200`)
  }
}

// The service's targets on each database: [name suffix, environment, the
// service's entry point].
function serviceVariants (otlpSinkUrl: string | undefined, issuer: BenchIssuer | undefined): Array<[string, Record<string, string>, string?]> {
  // The store run: the service on an empty store and on a full one.
  if (store !== undefined) return [['', {}], ['-store', {}]]
  const variants: Array<[string, Record<string, string>, string?]> = [['', {}], ['-warn', { LOG_LEVEL: 'warn' }]]
  if (issuer !== undefined) variants.push(['-jwt', issuer.env])
  if (otlpSinkUrl !== undefined) {
    variants.push(['+metrics', { METRICS_PORT: '0' }])
    variants.push(['+tracing', { OTEL_EXPORTER_OTLP_ENDPOINT: otlpSinkUrl }])
  }
  // The same service with other Node flags, in the same rounds (e.g. heap sizes).
  const nodeFlags = process.env.BENCH_NODE_FLAGS
  if (nodeFlags !== undefined && nodeFlags !== '') variants.push(['+flags', { NODE_OPTIONS: nodeFlags }])
  // Other builds of the service, in the same rounds (what a change bought).
  for (const build of (process.env.BENCH_SERVICES ?? '').split(',').filter((b) => b !== '')) {
    const [name, entry] = build.split('=')
    if (name === undefined || entry === undefined) throw new Error('BENCH_SERVICES lists name=path/to/server.js')
    variants.push([`+${name}`, {}, entry])
  }
  return variants
}

// A create with a remembered JWT against one with a static token: the
// server's CPU per answer, same rounds (the issue's target: within 3 µs).
function printJwtCost (phases: Phase[], targets: Running[]): void {
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN
  for (const jwt of targets.filter((t) => t.name.endsWith('-jwt'))) {
    const plain = targets.find((t) => t.name === jwt.name.slice(0, -'-jwt'.length))
    if (plain === undefined) continue
    for (const phase of phases) {
      const cpu = (t: Running): number => median((phase.rounds.get(t) ?? []).map((r) => r.cpu.server))
      const extra = cpu(jwt) - cpu(plain)
      console.log(`${phase.connections} conn: ${jwt.name} ${cpu(jwt).toFixed(1)} against ${plain.name} ${cpu(plain).toFixed(1)} CPU µs per answer ` +
        `(${extra >= 0 ? '+' : ''}${extra.toFixed(1)} µs; ${Math.abs(extra) <= 3 ? 'within 3 µs ok' : 'not within 3 µs'})`)
    }
  }
}

async function main (): Promise<number> {
  const missing = checkWrk()
  if (missing !== undefined) {
    console.error(missing)
    return 1
  }
  // LOG_LEVEL info is the service's default (src/config.ts).
  const serviceEnv = { API_TOKENS: token, LOG_LEVEL: 'info', NODE_ENV: 'production' }
  const profileArgs = (name: string): string[] => profileDir === undefined
    ? []
    // A folder per server: every thread writes a profile of its own (tsx's
    // loader thread, PGlite's thread), so the files are not named.
    : ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, `${name}-${Date.now()}`)}`]
  if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true })

  const targets: Running[] = []
  const databases: BenchDatabase[] = []
  const sink = operating ? await startOtlpSink() : undefined
  const issuer = wanted('postgres-jwt') || wanted('pglite-jwt') ? await startBenchIssuer() : undefined
  const variants = serviceVariants(sink?.url, issuer)
  const add = async (name: string, kind: Target['kind'], start: () => Promise<Server>, database?: BenchDatabase, stored?: number): Promise<void> => {
    const server = await start()
    const counts = { ok: 0, ...(stored === undefined ? {} : { stored }), other: {}, errors: 0, resent: 0, ...(name.endsWith('-jwt') && issuer !== undefined ? { token: issuer.token } : {}) }
    const running = { server, servers: [server], start, used: false }
    targets.push({ name, kind, ...running, ...counts, ...(database === undefined ? {} : { database }) })
  }
  // A database of its own per target, its table made by the service's migrations.
  const database = async (backend: 'postgres' | 'pglite'): Promise<BenchDatabase> => {
    const db = backend === 'postgres' ? await createPostgresDatabase(adminUrl as string) : createPgliteDatabase()
    databases.push(db)
    const migrated = await runToEnd(`${backend} migrate`, ['dist/src/bin/migrate.js'], { ...serviceEnv, ...db.env })
    if (backend === 'pglite') console.log(`pglite: initdb + migrations (npm run migrate) took ${migrated.seconds.toFixed(1)} s, peak RSS ${mb(migrated.peakRss)}`)
    return db
  }
  // The store run's full store: a database of its own, loaded by SQL.
  const fullStore = async (rows: number): Promise<[BenchDatabase, number]> => {
    const db = await database('postgres')
    const url = db.env.DATABASE_URL as string
    const loaded = await loadStore(url, rows, (line) => console.log(line))
    console.log(`store: ${loaded.stored} rows with random ids loaded in ${loaded.insert.toFixed(0)} s (INSERT … SELECT, primary key in place), ` +
      `VACUUM ANALYZE + CHECKPOINT ${loaded.vacuum.toFixed(0)} s; ${await storeSize(url)}`)
    return [db, loaded.stored]
  }
  let failed = false
  try {
    if (store !== undefined) {
      cluster = await startStoreCluster(intEnv('BENCH_STORE_PORT', 5499), chosenSettings(process.env.BENCH_STORE_SETTINGS))
      adminUrl = cluster.url
      console.log(`store: a throwaway PostgreSQL 15 cluster on ${adminUrl}, settings: ${cluster.settings.join(' ') || 'PostgreSQL\'s defaults'}`)
    }
    if (wanted('echo')) await add('echo', 'reference', async () => await startServer('echo', ['--import', 'tsx', 'bench/baseline.ts'], {}))
    const backends = (['postgres', 'pglite'] as const).filter((b) => b === 'pglite' || (adminUrl !== undefined && adminUrl !== ''))
    for (const backend of backends) {
      const bare = `${backend}-bare`
      if (wanted(bare)) {
        const db = await database(backend)
        await add(bare, 'bare', async () => await startServer(bare, [...profileArgs(bare), '--import', 'tsx', 'bench/bare-create.ts'], db.env), db)
      }
      for (const [suffix, env, entry = 'dist/server.js'] of variants) {
        const name = `${backend}${suffix}`
        const operatingVariant = suffix.startsWith('+')
        if (!wanted(name) && !(operatingVariant && wanted(backend))) continue
        const [db, stored] = suffix === '-store' ? await fullStore(store as number) : [await database(backend), undefined]
        await add(name, 'service', async () => await startServer(name, [...profileArgs(name), entry], { ...serviceEnv, ...env, ...db.env }, true), db, stored)
      }
    }
    if (targets.length === 0) throw new Error('no bench target selected')

    console.log(`${targets.map((t) => t.name).join(', ')}; wrk, 1 thread; warm-up ${warmupSeconds} s, ${rounds} rounds of ${seconds} s per target and connection count, ` +
      `${freshProcessEachRound ? 'a fresh process each round' : 'one process per target'}, node ${process.version}`)
    const phases = await runPhases(targets)

    console.log('')
    if (drift) {
      for (const target of targets) printDrift(target, targets, phases, peakRss(target))
    } else {
      for (const phase of phases) printPhase(phase, targets, (t) => peakRss(t as Running))
      if (store !== undefined) for (const phase of phases) printStore(phase, targets, store)
      if (sink !== undefined) console.log(`OTLP sink received ${sink.exports()} exports`)
    }

    if (issuer !== undefined) {
      console.log(`JWT: a first (uncached) verify of an ES256 access token takes ${(await issuer.firstVerifyMicros()).toFixed(0)} µs (median, in the bench process); ` +
        'the -jwt targets send one token, verified once and then remembered')
      printJwtCost(phases, targets)
    }
    // Every 200 must be a stored row, and nothing else may be.
    for (const target of targets) await target.server.stop()
    failed = !(await rowsMatchAnswers(targets))
    await printLogBytes(targets)
    console.log(`\ntargets: ${CHECKS}`)
  } finally {
    for (const target of targets) await target.server.stop().catch(() => {})
    for (const db of databases) await db.drop().catch((err: unknown) => console.error('could not drop a bench database:', err))
    cluster?.stop()
    await sink?.close()
    await issuer?.close()
  }
  return failed ? 1 : 0
}

process.exitCode = await main()
