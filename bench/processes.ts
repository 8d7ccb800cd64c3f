import { spawn, type ChildProcess } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, residentBytes } from '../test/support/processes.js'

export interface Server {
  name: string
  url: string
  child: ChildProcess
  // Highest resident set seen by polling, in bytes.
  maxRss(): number
  // The kernel's own high-water mark of the resident set, in bytes.
  peakRss(): number
  // Bytes the process wrote to stdout (with a log reader), once stopped.
  logBytes(): Promise<number | undefined>
  stop(): Promise<void>
}

// Starts `node args…` on 127.0.0.1 and waits until GET /health/ready answers
// 200. With `logReader` its stdout is a pipe read by `wc -c`, as a container
// engine or a log shipper reads a service's log: the service pays for the
// pipe, not a file on a disk other work may be flushing, and this process
// reads none of it (stderr still comes here).
export async function startServer (name: string, args: string[], env: Record<string, string>, logReader = false): Promise<Server> {
  const port = await freePort()
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const output: string[] = []
  const keep = (chunk: Buffer): void => { output.push(chunk.toString()); if (output.length > 50) output.shift() }
  let counted: Promise<number | undefined> = Promise.resolve(undefined)
  if (logReader) {
    const wc = spawn('wc', ['-c'], { stdio: [child.stdout, 'pipe', 'inherit'] })
    let text = ''
    wc.stdout.on('data', (chunk: Buffer) => { text += chunk.toString() })
    // 'close', not 'exit': wc's output may still be unread when it exits.
    counted = new Promise((resolve) => wc.once('close', () => resolve(text.trim() === '' ? undefined : Number(text.trim()))))
  } else {
    child.stdout.on('data', keep)
  }
  child.stderr.on('data', keep)
  const logTail = (): string => logReader ? '(stdout went to the log reader)\n' : ''
  let exited = false
  const exit = new Promise<void>((resolve) => child.once('exit', () => { exited = true; resolve() }))

  const pid = child.pid as number
  let max = 0
  let peak = 0
  const poll = setInterval(() => {
    max = Math.max(max, residentBytes(pid, 'VmRSS'))
    peak = Math.max(peak, residentBytes(pid, 'VmHWM'))
  }, 200)
  poll.unref()

  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 90_000
  for (;;) {
    if (exited) throw new Error(`${name} exited during start-up:\n${logTail()}${output.join('')}`)
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`${name} not ready after 90 s:\n${logTail()}${output.join('')}`)
    }
    const ready = await fetch(`${url}/health/ready`).then((r) => r.status === 200, () => false)
    if (ready) break
    await sleep(200)
  }

  return {
    name,
    url,
    child,
    // Once the process is gone its pid may be another's: only what was read
    // while it ran counts.
    maxRss: () => exited ? max : Math.max(max, residentBytes(pid, 'VmRSS')),
    peakRss: () => exited ? peak : Math.max(peak, residentBytes(pid, 'VmHWM')),
    logBytes: async () => await counted,
    async stop () {
      clearInterval(poll)
      if (exited) return
      max = Math.max(max, residentBytes(pid, 'VmRSS'))
      peak = Math.max(peak, residentBytes(pid, 'VmHWM'))
      child.kill('SIGTERM')
      const killed = await Promise.race([exit.then(() => false), sleep(20_000).then(() => true)])
      if (killed) {
        child.kill('SIGKILL')
        await exit
      }
    }
  }
}

// Runs `node args…` to the end; resolves with its peak resident set (bytes)
// as last polled, and its duration.
export async function runToEnd (name: string, args: string[], env: Record<string, string>): Promise<{ peakRss: number, seconds: number }> {
  const started = performance.now()
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  const output: string[] = []
  child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()))
  let peak = 0
  const pid = child.pid as number
  const poll = setInterval(() => { peak = Math.max(peak, residentBytes(pid, 'VmHWM')) }, 50)
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  clearInterval(poll)
  if (code !== 0) throw new Error(`${name} failed (exit ${code}):\n${output.join('')}`)
  return { peakRss: peak, seconds: (performance.now() - started) / 1000 }
}
