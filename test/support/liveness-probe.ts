import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { availableParallelism, loadavg } from 'node:os'

export interface Probe { status: number, ms: number }

// The contract's second for /health/live, and a margin for the shared machine
// (the probe, the sender and the service compete for two cores).
export const LIVENESS_LIMIT_MS = 1000
const MACHINE_SLACK_MS = 1500

// How many times more runnable work the machine has than cores: the
// one-minute load average over the core count, at least 1. A test running
// beside another suite gets a share of the cores, and a bound on wall time
// stretches by as much (2.5 s became 4-7 s at a load of 8 on two cores).
function oversubscription (): number {
  return Math.max(1, (loadavg()[0] ?? 0) / availableParallelism())
}

// The bound a burst's worst liveness answer is held to: the contract's second
// and the margin, stretched by how oversubscribed the machine is now. A loop
// held for seconds by the service itself still fails it on a quiet machine.
export function livenessBound (): { ms: number, why: string } {
  const times = oversubscription()
  const ms = Math.round((LIVENESS_LIMIT_MS + MACHINE_SLACK_MS) * times)
  return { ms, why: `${LIVENESS_LIMIT_MS} ms, +${MACHINE_SLACK_MS} ms for the shared machine, x${times.toFixed(1)} for its load: ${ms} ms` }
}

export const worst = (probes: Array<{ ms: number }>): number => Math.round(Math.max(...probes.map((p) => p.ms)))

// Asks GET /health/live every intervalMs from a process of its own, so the
// test process's own work (sending a burst) never delays the probe and the
// latencies measured are the server's. stop() returns every answer.
const script = `
const http = require('node:http')
const [url, interval] = [process.argv[1], Number(process.argv[2])]
let running = true
process.stdin.on('end', () => { running = false }).resume()
const once = () => new Promise((resolve) => {
  const started = performance.now()
  const done = (status) => resolve({ status, ms: performance.now() - started })
  http.get(url, { agent: false }, (res) => { res.resume(); res.on('end', () => done(res.statusCode)) }).on('error', () => done(0))
})
;(async () => {
  while (running) {
    const next = new Promise((resolve) => setTimeout(resolve, interval))
    process.stdout.write(JSON.stringify(await once()) + '\\n')
    await next
  }
})()
`

export function startLivenessProbe (url: string, intervalMs: number): { stop(): Promise<Probe[]> } {
  const child = spawn(process.execPath, ['-e', script, `${url}/health/live`, String(intervalMs)], { stdio: ['pipe', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  return {
    async stop () {
      const exited = once(child, 'close')
      child.stdin.end()
      await exited
      return out.trim().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Probe)
    }
  }
}
