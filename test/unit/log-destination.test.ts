import t, { type Test } from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import { flushLog, GATHER_MS, LOG_MIN_LENGTH, LogDestination } from '../../src/logger.js'

type SonicBoom = ReturnType<typeof pino.destination>

// sonic-boom writing to a file, with every write() it is handed recorded.
async function recordedFile (t: Test): Promise<{ sonic: SonicBoom, file: string, handed: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-log-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'log')
  const sonic = pino.destination({ dest: file, sync: false, minLength: LOG_MIN_LENGTH })
  await new Promise((resolve) => sonic.once('ready', resolve))
  const handed: string[] = []
  const write = sonic.write.bind(sonic)
  sonic.write = (data: string) => {
    handed.push(data)
    return write(data)
  }
  t.teardown(() => { sonic.end() })
  return { sonic, file, handed }
}

const line = (n: number): string => `{"n":${n}}\n`

t.test('a quiet destination hands a line over at once; a busy one at most once per GATHER_MS', async (t) => {
  const { sonic, file, handed } = await recordedFile(t)
  const destination = new LogDestination(sonic)
  destination.write(line(0))
  t.same(handed, [], 'not while the turn runs')
  // Timers of the same delay fire in the order they were set.
  await sleep(1)
  t.same(handed, [line(0)], 'quiet: handed over by a timer of the next turn')
  // Busy: lines over many turns, across timers.
  const started = performance.now()
  for (let n = 1; n <= 300; n++) {
    destination.write(line(n))
    if (n % 30 === 0) await sleep(1)
  }
  await flushLog(destination)
  const elapsed = performance.now() - started
  const writes = handed.length - 1
  t.ok(writes <= Math.floor(elapsed / GATHER_MS) + 2, `busy: ${writes} writes for 300 lines over ${elapsed.toFixed(1)} ms`)
  const expected = Array.from({ length: 301 }, (_, n) => line(n)).join('')
  t.equal(readFileSync(file, 'utf8'), expected, 'every line written once, in order')
})

t.test('a large gathering is handed over at once, without waiting for the timer', async (t) => {
  const { sonic, handed } = await recordedFile(t)
  const destination = new LogDestination(sonic)
  const long = `{"pad":"${'x'.repeat(1000)}"}\n`
  let written = 0
  while (handed.length === 0 && written < 1000) {
    destination.write(long)
    written++
  }
  t.equal(handed.length, 1, 'handed over while the lines were still being written')
  t.ok(written > 10 && written < 1000, `after ${written} lines of ${long.length} characters`)
  await flushLog(destination)
})

t.test('flush writes the gathered lines before it calls back; flushSync before it returns', async (t) => {
  const { sonic, file, handed } = await recordedFile(t)
  const destination = new LogDestination(sonic)
  destination.write(line(1))
  await flushLog(destination)
  t.equal(readFileSync(file, 'utf8'), line(1), 'flush: written before it calls back, in the same turn')
  destination.write(line(2))
  destination.write(line(3))
  destination.flushSync()
  t.equal(readFileSync(file, 'utf8'), line(1) + line(2) + line(3), 'flushSync: written, in order, before it returns')
  t.equal(handed.length, 1, 'not handed to the asynchronous write, which an exit could cut short')
  await sleep(GATHER_MS * 3)
  t.equal(readFileSync(file, 'utf8'), line(1) + line(2) + line(3), 'and not written again when the timer would have run')
})

t.test('a quiet service: a single line is written, without a flush', async (t) => {
  const { sonic, file } = await recordedFile(t)
  const destination = new LogDestination(sonic)
  destination.write(line(7))
  // Handed over at once; the write itself completes shortly after.
  for (let waited = 0; readFileSync(file, 'utf8') === '' && waited < 5000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(readFileSync(file, 'utf8'), line(7))
})
