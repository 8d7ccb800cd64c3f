import { spawn } from 'node:child_process'
import { once } from 'node:events'

export interface Probe { status: number, ms: number }

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
