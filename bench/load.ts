import { spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { cpuSeconds } from './cpu.js'

export interface LoadResult {
  // Answers counted: wrk's, then those to the requests sent again.
  responses: number
  ok: number
  statusCounts: Record<string, number>
  // Socket errors wrk saw (connect, read, write, timeout).
  errors: number
  timeouts: number
  seconds: number
  reqPerSec: number
  // Latency percentiles of wrk's answers, in ms.
  p50: number
  p99: number
  // CPU seconds wrk used.
  loadCpuSeconds: number
  // Requests in flight when wrk's time was up, sent again by the bench.
  resent: number
  // Of those, the ones answered 409: the bare create answers a replay so,
  // and the bench's ids are never sent twice otherwise, so the first
  // request stored that row. Counted with the 200s against the rows.
  storedEarlier: number
}

export interface Load {
  // `seconds` of creates over `connections` keep-alive connections, each
  // with an id never sent before. Requests still in flight when the time is
  // up are sent again (same id, same body) and their answers counted, so
  // every id sent has one counted answer and rows stored can equal the 200s.
  run(seconds: number): Promise<LoadResult>
}

const SCRIPT = fileURLToPath(new URL('create-load.lua', import.meta.url))

// The load generator is wrk (Debian's package), one thread: a C event loop
// far lighter per request than the server it measures, so the two cores
// are mostly the server's and its database's. The bench installs nothing.
export function checkWrk (): string | undefined {
  const found = spawnSync('wrk', ['--version'], { encoding: 'utf8' })
  if (found.error !== undefined) return 'wrk is not installed: the bench drives its targets with wrk (Debian: apt-get install -y wrk)'
  return undefined
}

// Every request of a bench run gets an id never sent before, whichever load
// sends it: several loads (one per connection count) share a target.
let nextId = 1

interface WrkResult {
  statuses: Record<string, number>
  // As decimal text: random ids are past 2^53.
  pending: string[]
  nextId: number
  microseconds: number
  errors: { connect: number, read: number, write: number, timeout: number }
  p50: number
  p99: number
}

async function runWrk (url: string, token: string, connections: number, seconds: number, randomIds: boolean): Promise<{ result: WrkResult, cpu: number }> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', SCRIPT, url, '--', String(nextId), token, ...(randomIds ? ['random'] : [])]
  const child = spawn('wrk', args,
    { stdio: ['ignore', 'pipe', 'pipe'] })
  // wrk's CPU: the times of this process's children that ended (wrk is
  // the only one that ends meanwhile), from /proc.
  const endedChildren = (): number => cpuSeconds(process.pid, true) - cpuSeconds(process.pid)
  const before = endedChildren()
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { out += chunk.toString() })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  const cpu = endedChildren() - before
  const line = out.split('\n').find((l) => l.startsWith('BENCH-RESULT '))
  if (code !== 0 || line === undefined) throw new Error(`wrk failed (exit ${code}):\n${out}`)
  const result = JSON.parse(line.slice('BENCH-RESULT '.length)) as WrkResult
  nextId = result.nextId
  return { result, cpu }
}

// The requests wrk left in flight, sent again one at a time with their own
// body; a create is idempotent, so the service answers each 200 (created or
// replayed) and the bare create 200 or 409 (stored by the first request).
async function resend (url: string, token: string, ids: string[], statusCounts: Record<string, number>): Promise<{ errors: number, storedEarlier: number }> {
  let errors = 0
  let storedEarlier = 0
  for (const id of ids) {
    const answer = await fetch(`${url}/plants`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: `{"id":${id},"name":"Plant ${id}","tag":"bench"}`
    }).then(async (res) => { await res.arrayBuffer(); return String(res.status) }, () => undefined)
    if (answer === undefined) errors++
    else if (answer === '409') storedEarlier++
    else statusCounts[answer] = (statusCounts[answer] ?? 0) + 1
  }
  return { errors, storedEarlier }
}

// With `randomIds`, random int64 ids (create-load.lua) instead of 1, 2, 3, …
export function createLoad (url: string, token: string, connections: number, randomIds = false): Load {
  return {
    async run (seconds) {
      const { result, cpu } = await runWrk(url, token, connections, seconds, randomIds)
      const statusCounts: Record<string, number> = { ...result.statuses }
      const answered = Object.values(statusCounts).reduce((a, b) => a + b, 0)
      const wrkSeconds = result.microseconds / 1e6
      const resent = await resend(url, token, result.pending, statusCounts)
      const responses = Object.values(statusCounts).reduce((a, b) => a + b, 0) + resent.storedEarlier
      const e = result.errors
      return {
        responses,
        ok: statusCounts['200'] ?? 0,
        statusCounts,
        errors: e.connect + e.read + e.write + resent.errors,
        timeouts: e.timeout,
        seconds: wrkSeconds,
        reqPerSec: answered / wrkSeconds,
        p50: result.p50 / 1000,
        p99: result.p99 / 1000,
        loadCpuSeconds: cpu,
        resent: result.pending.length,
        storedEarlier: resent.storedEarlier
      }
    }
  }
}
