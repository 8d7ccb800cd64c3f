// npx tsx bench/log-lines.ts [requests]: what a request's log lines cost the
// process, in CPU µs per request (user + system, so the write(2) calls
// count), measured with the service's own logger settings writing to a
// file. CPU time, not wall time: a busy machine slows it less than it slows
// req/s. The ways a request has been logged:
//   three-sync   Fastify's "incoming request" and "request completed" and the
//                route's "plant create", each a synchronous write
//   one-sync     the access line alone, a synchronous write
//   one-async    the access line, pino's asynchronous destination, each
//                line handed to it as it is logged
//   one-batched  the same, written once 4 KiB are gathered
//   warn         LOG_LEVEL=warn: the request's pino child, no line written
//
// npx tsx bench/log-lines.ts destinations [lines]: the access line's path to
// stdout, each way below, in bursts of 32 and of 128 lines per turn of the
// event loop (as 32 and 128 connections answer), into a pipe (a FIFO) that
// cat, another process, drains as a container engine reads stdout. CPU µs
// per line of the whole process (process.cpuUsage: every thread, a worker's
// too) and of the main thread alone (process.threadCpuUsage), and the
// write(2) calls' average size where the destination reports them. Between two
// bursts the main thread sleeps for the rest of the answers' work
// (LOG_LINES_OTHER_WORK_US a line, 30 unless set).
import { execFileSync, spawn } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { flushLog, loggerOptions } from '../src/logger.js'

const mode = process.argv[2] === 'destinations' ? 'destinations' : 'ways'
const count = Number((mode === 'destinations' ? process.argv[3] : process.argv[2]) ?? (mode === 'destinations' ? 64_000 : 200_000))
const ROUNDS = 5
const dir = mkdtempSync(join(tmpdir(), 'plant-store-log-lines-'))

type SonicBoom = ReturnType<typeof pino.destination>
type Stream = pino.DestinationStream & NodeJS.EventEmitter & { flush: (cb: (err?: Error | null) => void) => void, end: () => void }
type Write = 'sync' | 'async' | 'batched'
const destination = (name: string, write: Write): SonicBoom => write === 'sync'
  ? pino.destination({ dest: join(dir, name), sync: true })
  : pino.destination({ dest: join(dir, name), sync: false, minLength: write === 'batched' ? 4096 : 1 })

function logger (level: string, stream: pino.DestinationStream): pino.Logger {
  const options = loggerOptions({ logLevel: level as 'info', production: true }) as pino.LoggerOptions
  return pino({ ...options, level }, stream)
}

// The access line as the service writes it for a create (plugins/access-log.ts): the request's child with its id, the
// caller a static token's name, about 240 bytes with pino's level, time, pid and hostname.
const reqId = (n: number): string => `0f8fad5b-d9cb-469f-a165-${String(n).padStart(12, '0')}`
const access = (n: number): Record<string, unknown> =>
  ({ method: 'POST', route: '/plants', status: 200, durationMs: 1.23 + n % 7, caller: 'token-3f2a9c81d0e4', outcome: 'created' })
const accessLine = (parent: pino.Logger, n: number): void => parent.child({ reqId: reqId(n) }).info(access(n), 'request')
const fakeRequest = { method: 'POST', url: '/plants', version: '1.1', host: '127.0.0.1:3000', remoteAddress: '127.0.0.1', remotePort: 51234 }

const ways: Record<string, { level: string, write: Write, line: (parent: pino.Logger, n: number) => void }> = {
  'three-sync': {
    level: 'info',
    write: 'sync',
    line: (parent, n) => {
      const log = parent.child({ reqId: reqId(n) })
      log.info({ req: fakeRequest }, 'incoming request')
      log.info({ plantId: String(n), outcome: 'created' }, 'plant create')
      log.info({ res: { statusCode: 200 }, responseTime: 1.23 }, 'request completed')
    }
  },
  'one-sync': { level: 'info', write: 'sync', line: accessLine },
  'one-async': { level: 'info', write: 'async', line: accessLine },
  'one-batched': { level: 'info', write: 'batched', line: accessLine },
  warn: { level: 'warn', write: 'async', line: accessLine }
}

async function measureWay (name: string): Promise<number> {
  const way = ways[name] as (typeof ways)[string]
  const sonic = destination(name, way.write)
  await new Promise((resolve) => sonic.once('ready', resolve))
  const log = logger(way.level, sonic)
  // Batches of a few hundred lines per turn of the event loop, as under load,
  // so the asynchronous writes can complete between them.
  const started = process.cpuUsage()
  for (let n = 0; n < count; n++) {
    way.line(log, n)
    if (n % 256 === 255) await new Promise((resolve) => setImmediate(resolve))
  }
  await flushLog(sonic)
  const used = process.cpuUsage(started)
  sonic.end()
  return (used.user + used.system) / count
}

// The access line's way to stdout. The service's today: asynchronous, written once 4 KiB are gathered, flushed
// every 100 ms. maxWrite caps the chunk sonic-boom fills (and measures again on every line) and a write(2)'s size.
const destinations: Record<string, (fd: number) => Stream> = {
  'warn: the child, no line': (fd) => new Dropping(fd),
  'none: the line made, not written': (fd) => new Dropping(fd),
  'async, minLength 4096 (main)': (fd) => pino.destination({ dest: fd, sync: false, minLength: 4096, periodicFlush: 100 }),
  'async, minLength 1024': (fd) => pino.destination({ dest: fd, sync: false, minLength: 1024, periodicFlush: 100 }),
  'async, minLength 0': (fd) => pino.destination({ dest: fd, sync: false }),
  'async, minLength 0, maxWrite 2048': (fd) => pino.destination({ dest: fd, sync: false, maxWrite: 2048 }),
  'async, minLength 1024, maxWrite 4096': (fd) => pino.destination({ dest: fd, sync: false, minLength: 1024, maxWrite: 4096, periodicFlush: 100 }),
  'async, minLength 4096, maxWrite 8192': (fd) => pino.destination({ dest: fd, sync: false, minLength: 4096, maxWrite: 8192, periodicFlush: 100 }),
  'sync, minLength 0': (fd) => pino.destination({ dest: fd, sync: true }),
  'sync, minLength 4096': (fd) => pino.destination({ dest: fd, sync: true, minLength: 4096, periodicFlush: 100 }),
  'sync, minLength 8192': (fd) => pino.destination({ dest: fd, sync: true, minLength: 8192, periodicFlush: 100 }),
  'transport, pino/file worker': (fd) => pino.transport({ target: 'pino/file', options: { destination: fd } }) as Stream,
  'transport, worker minLength 4096': (fd) => pino.transport({ target: 'pino/file', options: { destination: fd, minLength: 4096 } }) as Stream
}

// The rest of an answer's work, a turn's lines apart (the service spends about 30 µs of CPU on an answer): slept,
// not spent, so it costs no CPU, and the write(2) in flight meanwhile completes as it would in the service.
const OTHER_WORK_US = Number(process.env.LOG_LINES_OTHER_WORK_US ?? 30)
const asleep = new Int32Array(new SharedArrayBuffer(4))

// The floors: the request's child at warn (as Fastify makes one for every request), and pino making each line with
// nothing writing it.
class Dropping extends EventEmitter {
  constructor (readonly fd: number) { super(); process.nextTick(() => this.emit('ready')) }
  write (): boolean { return true }
  flush (cb: () => void): void { cb() }
  end (): void { closeSync(this.fd); this.emit('close') }
}

// behind: KiB still to write after the last burst (lines gathered faster than one write(2) a turn takes them).
interface PerLine { process: number, main: number, bytesPerWrite: number | undefined, behind: number | undefined }

async function measureDestination (make: (fd: number) => Stream, level: string, fifo: string, burst: number): Promise<PerLine> {
  const stream = make(openSync(fifo, 'w'))
  await once(stream, 'ready')
  const log = logger(level, stream)
  let writes = 0
  let bytes = 0
  stream.on('write', (n: number) => { writes++; bytes += n }) // sonic-boom's; a transport's worker says nothing
  const started = process.cpuUsage()
  const mainStarted = process.threadCpuUsage()
  for (let n = 0; n < count; n++) {
    accessLine(log, n)
    if (n % burst === burst - 1) {
      Atomics.wait(asleep, 0, 0, burst * OTHER_WORK_US / 1000)
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
  const writtenInTurns = bytes
  await flushLog(stream)
  const used = process.cpuUsage(started)
  const main = process.threadCpuUsage(mainStarted)
  // Not events.once, which rejects on 'error': sonic-boom's fsync of a pipe on end fails (EINVAL) after the lines.
  const closed = new Promise((resolve) => stream.once('close', resolve))
  stream.on('error', () => {})
  stream.end()
  await closed
  const reported = writes > 0
  return {
    process: (used.user + used.system) / count,
    main: (main.user + main.system) / count,
    bytesPerWrite: reported ? bytes / writes : undefined,
    behind: reported ? (bytes - writtenInTurns) / 1024 : undefined
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
const load = (): string => loadavg().map((x) => x.toFixed(2)).join(' ')

async function runWays (): Promise<void> {
  const names = Object.keys(ways)
  const results = new Map<string, number[]>(names.map((n) => [n, []]))
  // Alternating rounds, as in npm run bench; the median of each.
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of names) (results.get(name) as number[]).push(await measureWay(name))
  }
  console.log(`${count} requests per round, ${ROUNDS} rounds, CPU µs per request (median; rounds)`)
  for (const name of names) {
    const xs = results.get(name) as number[]
    console.log(`${name.padEnd(20)} ${median(xs).toFixed(2).padStart(6)}   (${xs.map((x) => x.toFixed(2)).join(', ')})`)
  }
}

function cell (xs: PerLine[]): string {
  const cpu = (pick: (x: PerLine) => number): string => median(xs.map(pick)).toFixed(2).padStart(5)
  const reported = (pick: (x: PerLine) => number | undefined): string =>
    xs[0]?.bytesPerWrite === undefined ? '—'.padStart(5) : median(xs.map((x) => pick(x) ?? 0)).toFixed(0).padStart(5)
  return `${cpu((x) => x.process)} / ${cpu((x) => x.main)}  ${reported((x) => x.bytesPerWrite)}  ${reported((x) => x.behind)}`
}

async function runDestinations (): Promise<void> {
  const fifo = join(dir, 'stdout')
  execFileSync('mkfifo', [fifo])
  const reader = spawn('cat', [fifo], { stdio: ['ignore', 'ignore', 'inherit'] })
  const keeper = openSync(fifo, 'w') // cat sees no end of file between destinations
  const bursts = [32, 128]
  const results = new Map<string, PerLine[]>()
  console.log(`load average before: ${load()}`)
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, make] of Object.entries(destinations)) {
      for (const burst of bursts) {
        const key = `${name}|${burst}`
        results.set(key, [...(results.get(key) ?? []), await measureDestination(make, name.startsWith('warn') ? 'warn' : 'info', fifo, burst)])
      }
    }
  }
  closeSync(keeper)
  reader.kill() // a transport's worker may leave its descriptor of the pipe open: no end of file for cat
  console.log(`load average after: ${load()}`)
  console.log(`${count} lines per round, ${ROUNDS} rounds, medians; CPU µs per line: whole process / main thread; ` +
    'bytes per write(2); KiB behind after the last burst')
  console.log(`${''.padEnd(38)} ${'burst 32'.padEnd(30)} burst 128`)
  for (const name of Object.keys(destinations)) {
    const cells = bursts.map((burst) => cell(results.get(`${name}|${burst}`) as PerLine[]))
    console.log(`${name.padEnd(38)} ${cells.map((c) => c.padEnd(30)).join(' ')}`)
  }
}

if (mode === 'destinations') await runDestinations()
else await runWays()
rmSync(dir, { recursive: true, force: true })
