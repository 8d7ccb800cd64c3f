import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, mkdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { TOKEN, type Teardown } from '../helper.js'
import { buildOnce, inputsHash, root } from './build-once.js'
import { migratedDataDir } from './pglite-template.js'

// The one way tests (and the benchmark's port and memory readings) run the
// service as a process: spawnProcess runs any command; startBuiltServer runs
// the compiled server as the image does; startServerProcess runs
// server.ts through tsx and waits until it listens.

export { root }

// The runtime the image holds, laid out as the Dockerfile's last stage lays
// it out: package.json, dist/ compiled from this tree, migrations/ beside it.
// Dependencies resolve from the project's node_modules above. Each test file
// that needs it calls stageRuntime() once; the build is keyed by a hash of
// its inputs, so parallel test files share one compile and never write the
// files another file's server is running from.
const cacheDir = join(root, 'node_modules', '.cache', 'plant-store-runtime')
const inputs = ['app.ts', 'server.ts', 'src', 'plugins', 'routes', 'migrations', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']

export async function stageRuntime (): Promise<string> {
  return await buildOnce(join(cacheDir, inputsHash(inputs)), async (partial) => {
    mkdirSync(partial)
    execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', join(partial, 'dist')], { cwd: root, stdio: 'inherit' })
    cpSync(join(root, 'migrations'), join(partial, 'migrations'), { recursive: true })
    cpSync(join(root, 'package.json'), join(partial, 'package.json'))
  })
}

// A port nothing listens on right now, from the OS (never a fixed one).
export async function freePort (): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  server.close()
  await once(server, 'close')
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}

export interface Exit { code: number | null, signal: NodeJS.Signals | null }

export interface ServerProcess {
  child: ChildProcess
  stdout(): string
  stderr(): string
  exited: Promise<Exit>
  signal(signal: NodeJS.Signals): void
  // Polls GET url until it answers 200; throws when the process exits first.
  waitFor(url: string, timeoutMs?: number): Promise<void>
  stop(signal?: NodeJS.Signals): Promise<Exit>
}

// A field of /proc/PID/status in bytes (Linux): VmRSS is the resident set
// now, VmHWM its high-water mark. 0 once the process is gone.
export function residentBytes (pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match === null ? 0 : Number(match[1]) * 1024
  } catch {
    return 0
  }
}

// Runs argv (node first) in cwd with exactly env (plus PATH), as a container
// would; the test's teardown kills whatever is still running.
export function spawnProcess (t: Teardown, argv: string[], cwd: string, env: Record<string, string>): ServerProcess {
  const proc = launch(argv, cwd, env)
  t.teardown(async () => {
    if (proc.child.exitCode === null && proc.child.signalCode === null) {
      proc.child.kill('SIGKILL')
      await proc.exited
    }
  })
  return proc
}

function launch (argv: string[], cwd: string, env: Record<string, string>): ServerProcess {
  const [command, ...args] = argv
  const child = spawn(command === 'node' ? process.execPath : command as string, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  let err = ''
  child.stdout?.on('data', (d: Buffer) => { out += d.toString() })
  child.stderr?.on('data', (d: Buffer) => { err += d.toString() })
  const exited = new Promise<Exit>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal }))
  })
  const alive = (): boolean => child.exitCode === null && child.signalCode === null
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    signal: (signal) => { if (alive()) child.kill(signal) },
    async waitFor (url, timeoutMs = 90_000) {
      const started = Date.now()
      while (Date.now() - started < timeoutMs) {
        if (!alive()) throw new Error(`exited before ${url} answered 200:\n${out}\n${err}`)
        const status = await fetch(url, { signal: AbortSignal.timeout(2000) }).then((r) => r.status, () => 0)
        if (status === 200) return
        await sleep(200)
      }
      throw new Error(`${url} did not answer 200 within ${timeoutMs} ms:\n${out}\n${err}`)
    },
    async stop (signal = 'SIGTERM') {
      if (alive()) child.kill(signal)
      return await exited
    }
  }
}

// The built server, started as the image's CMD starts it.
export function startBuiltServer (t: Teardown, runtimeDir: string, env: Record<string, string>): ServerProcess {
  return spawnProcess(t, ['node', 'dist/server.js'], runtimeDir, env)
}

// Output split into lines, each parsed as JSON where it is JSON.
export function jsonLines (text: string): { lines: Array<Record<string, unknown>>, other: string[] } {
  const lines: Array<Record<string, unknown>> = []
  const other: string[] = []
  for (const line of text.split('\n')) {
    if (line === '') continue
    try {
      const value: unknown = JSON.parse(line)
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) lines.push(value as Record<string, unknown>)
      else other.push(line)
    } catch {
      other.push(line)
    }
  }
  return { lines, other }
}

// The service from source (server.ts through tsx: the same code `npm run
// build` compiles, with no build shared between test files that tap runs in
// parallel) on PostgreSQL, listening on a port of its own.
export interface SourceServer {
  readonly child: ChildProcess
  // http://127.0.0.1:PORT once it listens.
  readonly url: string
  // JSON log lines so far, parsed.
  readonly logs: Array<Record<string, unknown>>
  // Other stdout lines so far (the start-up banner).
  readonly text: string[]
  // Resident set size in bytes.
  rss(): number
  // SIGTERM (SIGKILL after 15 s), then the exit code.
  stop(): Promise<number | null>
}

export interface SourceServerOptions {
  // Unset, and no PGLITE_DATA_DIR in env: embedded PGlite on a copy of the
  // migrated template (test/support/pglite-template.ts), removed when the
  // process exits.
  databaseUrl?: string
  env?: Record<string, string>
  startTimeoutMs?: number
}

export async function startServerProcess (opts: SourceServerOptions): Promise<SourceServer> {
  const pglite = opts.databaseUrl === undefined && opts.env?.PGLITE_DATA_DIR === undefined ? await migratedDataDir() : undefined
  const proc = launch(['node', '--import', 'tsx', 'server.ts'], root, {
    HOME: process.env.HOME ?? '',
    NODE_ENV: 'test',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    API_TOKENS: TOKEN,
    ...(pglite === undefined ? {} : { PGLITE_DATA_DIR: pglite.dataDir }),
    ...(opts.databaseUrl === undefined ? {} : { DATABASE_URL: opts.databaseUrl }),
    ...opts.env
  })
  proc.exited.then(() => pglite?.remove(), () => {})
  const { child } = proc
  const logs: Array<Record<string, unknown>> = []
  const text: string[] = []
  const startTimeoutMs = opts.startTimeoutMs ?? 60_000
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not listen within ${startTimeoutMs} ms; stderr: ${proc.stderr()}`)), startTimeoutMs)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code} before listening; stderr: ${proc.stderr()}`))
    })
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      const entry = jsonLines(line).lines[0]
      if (entry === undefined) {
        text.push(line)
        return
      }
      logs.push(entry)
      const match = /listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(String(entry.msg))
      if (match !== null) {
        clearTimeout(timer)
        resolve(match[1] as string)
      }
    })
  })

  let url: string
  try {
    url = await listening
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }

  return {
    child,
    url,
    logs,
    text,
    rss: () => residentBytes(child.pid as number),
    async stop () {
      const timer = setTimeout(() => proc.signal('SIGKILL'), 15_000)
      const { code } = await proc.stop('SIGTERM')
      clearTimeout(timer)
      return code
    }
  }
}
