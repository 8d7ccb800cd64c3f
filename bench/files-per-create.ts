// How many of the project's files one create runs: the service built as
// server.ts builds it (buildApp, the server's logger; on the
// PostgreSQL server of DATABASE_URL, in a database of its own made for the
// run and dropped after it, or else embedded PGlite in memory), listening on a
// loopback port; 20 warm-up creates over HTTP, then V8 precise coverage
// with call counts (node:inspector) around ONE new create. A file counts
// when any of its functions was called in that window; files under
// node_modules, Node's own modules and this script are left out.
//
// Counted on the main thread only: PGlite's worker thread is another V8
// isolate, which an inspector session of the main thread does not see;
// the files it runs (src/store/pglite/thread.ts and what it imports) are
// not counted, only the main thread's side of the worker (src/store/pglite/thread-calls.ts).
//
//   npm run bench:files                      embedded PGlite
//   DATABASE_URL=postgres://… npm run bench:files
//
// Log lines go to stdout, as the server's do; the count and the list go to
// stderr (`npm run bench:files >/dev/null` shows only them).
import { randomUUID } from 'node:crypto'
import { Session } from 'node:inspector/promises'
import type { AddressInfo } from 'node:net'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildApp } from '../app.js'
import { loadConfig } from '../src/config.js'
import { flushLog, logDestination, loggerOptions } from '../src/logger.js'
import { withClient } from '../test/support/database.js'

const WARM_UP_CREATES = 20
const TOKEN = 'files-per-create-token'
const root = fileURLToPath(new URL('..', import.meta.url))
const self = fileURLToPath(import.meta.url)

interface ScriptCoverage { url: string, functions: Array<{ ranges: Array<{ count: number }> }> }

async function create (url: string, id: number): Promise<void> {
  const res = await fetch(`${url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id, name: `files-per-create ${id}`, tag: 'bench' })
  })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`create ${id} answered ${res.status}: ${text}`)
}

// The project's files in which a function was called since the last take.
function filesRun (coverage: ScriptCoverage[]): string[] {
  const files = new Set<string>()
  for (const script of coverage) {
    if (!script.url.startsWith('file://')) continue
    const path = fileURLToPath(script.url)
    if (path === self || path.includes('/node_modules/') || !path.startsWith(root)) continue
    if (script.functions.some((f) => (f.ranges[0]?.count ?? 0) > 0)) files.add(relative(root, path))
  }
  return [...files].sort()
}

// A database of the run's own on the server DATABASE_URL names.
async function throwawayDatabase (serverUrl: string): Promise<{ url: string, drop: () => Promise<void> }> {
  const name = `files_per_create_${randomUUID().replaceAll('-', '')}`
  await withClient(serverUrl, (c) => c.query(`CREATE DATABASE ${name}`))
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  return { url: url.toString(), drop: async () => { await withClient(serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)) } }
}

// Warm up, then count the files ONE create runs.
async function measure (url: string): Promise<string[]> {
  while ((await fetch(`${url}/health/ready`)).status !== 200) await new Promise((resolve) => setTimeout(resolve, 100))
  for (let id = 1; id <= WARM_UP_CREATES; id++) await create(url, id)
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false })
  // The first take returns everything since start-up and resets the counts.
  await session.post('Profiler.takePreciseCoverage')
  await create(url, WARM_UP_CREATES + 1)
  const { result } = await session.post('Profiler.takePreciseCoverage') as { result: ScriptCoverage[] }
  await session.post('Profiler.stopPreciseCoverage')
  session.disconnect()
  return filesRun(result)
}

const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: 'production', PORT: '0', HOST: '127.0.0.1', API_TOKENS: TOKEN, LOG_LEVEL: process.env.LOG_LEVEL ?? 'info' }
const serverUrl = env.DATABASE_URL ?? ''
const database = serverUrl === '' ? undefined : await throwawayDatabase(serverUrl)
if (database === undefined) env.PGLITE_DATA_DIR = 'memory://'
else env.DATABASE_URL = database.url
const { config } = loadConfig(env)
const logs = logDestination()
// As the server does: on PostgreSQL it serves while migrations run.
const app = await buildApp({
  config,
  logger: loggerOptions(config, logs),
  ...(config.database.kind === 'postgres' ? { background: { onFatal: (err: unknown) => { throw err } } } : {})
}).catch(async (err: unknown) => {
  await database?.drop()
  throw err
})
let files: string[]
try {
  await app.listen({ port: 0, host: config.host })
  files = await measure(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`)
} finally {
  await app.close()
  await database?.drop()
  await flushLog(logs)
}
process.stderr.write(`${files.length} project files run for one create on ${config.database.kind} ` +
  '(main thread; PGlite\'s worker thread not counted)\n' + files.map((f) => `  ${f}\n`).join(''))
