// npx tsx bench/log-lines.ts [requests]: what a request's log lines cost the
// process, in CPU µs per request (user + system, so the write(2) calls
// count), measured with the service's own logger settings writing to a
// file. CPU time, not wall time: a busy machine slows it less than it slows
// req/s. The ways a request has been logged:
//   three-sync   Fastify's "incoming request" and "request completed" and the
//                route's "plant create", each a synchronous write
//   one-sync     the access line alone, a synchronous write
//   one-async    the access line, pino's asynchronous destination, each
//                line handed to it as it is logged (now)
//   warn         LOG_LEVEL=warn: the request's pino child, no line written
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { flushLog, loggerOptions } from '../src/logger.js'

const requests = Number(process.argv[2] ?? 200_000)
const dir = mkdtempSync(join(tmpdir(), 'plant-store-log-lines-'))

type SonicBoom = ReturnType<typeof pino.destination>
type Write = 'sync' | 'async' | 'batched'
const destination = (name: string, write: Write): SonicBoom => write === 'sync'
  ? pino.destination({ dest: join(dir, name), sync: true })
  : pino.destination({ dest: join(dir, name), sync: false, minLength: write === 'batched' ? 4096 : 1 })

function logger (level: string, stream: SonicBoom): pino.Logger {
  const options = loggerOptions({ logLevel: level as 'info', production: true }) as pino.LoggerOptions
  return pino({ ...options, level }, stream)
}

const reqId = (n: number): string => `0f8fad5b-d9cb-469f-a165-${String(n).padStart(12, '0')}`
const access = (n: number): Record<string, unknown> => ({ method: 'POST', route: '/plants', status: 200, durationMs: 1.23 + n % 7, outcome: 'created' })
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
  'one-sync': { level: 'info', write: 'sync', line: (parent, n) => parent.child({ reqId: reqId(n) }).info(access(n), 'request') },
  'one-async': { level: 'info', write: 'async', line: (parent, n) => parent.child({ reqId: reqId(n) }).info(access(n), 'request') },
  'one-batched': { level: 'info', write: 'batched', line: (parent, n) => parent.child({ reqId: reqId(n) }).info(access(n), 'request') },
  warn: {
    level: 'warn',
    write: 'async',
    line: (parent, n) => parent.child({ reqId: reqId(n) }).info(access(n), 'request')
  }
}

async function measure (name: string): Promise<number> {
  const way = ways[name] as (typeof ways)[string]
  const sonic = destination(name, way.write)
  await new Promise((resolve) => sonic.once('ready', resolve))
  const log = logger(way.level, sonic)
  // Batches of a few hundred lines per turn of the event loop, as under load,
  // so the asynchronous writes can complete between them.
  const started = process.cpuUsage()
  for (let n = 0; n < requests; n++) {
    way.line(log, n)
    if (n % 256 === 255) await new Promise((resolve) => setImmediate(resolve))
  }
  await flushLog(sonic)
  const used = process.cpuUsage(started)
  sonic.end()
  return (used.user + used.system) / requests
}

const names = Object.keys(ways)
const results = new Map<string, number[]>(names.map((n) => [n, []]))
// Alternating rounds, as in npm run bench; the median of each.
for (let round = 0; round < 5; round++) {
  for (const name of names) (results.get(name) as number[]).push(await measure(name))
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
console.log(`${requests} requests per round, 5 rounds, CPU µs per request (median; rounds)`)
for (const name of names) {
  const xs = results.get(name) as number[]
  console.log(`${name.padEnd(20)} ${median(xs).toFixed(2).padStart(6)}   (${xs.map((x) => x.toFixed(2)).join(', ')})`)
}
rmSync(dir, { recursive: true, force: true })
