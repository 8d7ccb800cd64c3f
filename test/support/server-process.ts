import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { projectRoot } from '../../src/paths.js'
import { TOKEN } from '../helper.js'

// The service as its own process: src/server.ts, run through tsx (the same
// code `npm run build` compiles; no build step shared between test files
// that tap runs in parallel).
export interface ServerProcess {
  readonly child: ChildProcess
  // http://127.0.0.1:PORT once it listens.
  readonly url: string
  // JSON log lines so far, parsed.
  readonly logs: Array<Record<string, unknown>>
  // Other stdout lines so far (the start-up banner).
  readonly text: string[]
  // Resident set size in bytes, from /proc (Linux).
  rss(): number
  // SIGTERM, then the exit code.
  stop(): Promise<number | null>
}

export interface ServerProcessOptions {
  // Unset: embedded PGlite in memory.
  databaseUrl?: string
  env?: Record<string, string>
  startTimeoutMs?: number
}

export async function startServerProcess (opts: ServerProcessOptions): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: projectRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      NODE_ENV: 'test',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      API_TOKENS: TOKEN,
      ...(opts.databaseUrl === undefined ? { PGLITE_DATA_DIR: 'memory://' } : { DATABASE_URL: opts.databaseUrl }),
      ...opts.env
    }
  })
  const logs: Array<Record<string, unknown>> = []
  const text: string[] = []
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString() })

  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not listen within ${opts.startTimeoutMs ?? 20_000} ms; stderr: ${stderr}`)), opts.startTimeoutMs ?? 20_000)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code} before listening; stderr: ${stderr}`))
    })
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      let entry: Record<string, unknown>
      try {
        entry = JSON.parse(line) as Record<string, unknown>
      } catch {
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
    rss () {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8')
      const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1]
      return kb === undefined ? 0 : Number(kb) * 1024
    },
    async stop () {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
      const exited = once(child, 'exit')
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
      const [code] = await exited as [number | null]
      clearTimeout(timer)
      return code
    }
  }
}
