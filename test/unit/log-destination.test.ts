import t, { type Test } from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setImmediate as turn } from 'node:timers/promises'
import pino from 'pino'
import { flushLog, LOG_MIN_LENGTH, LogDestination } from '../../src/logger.js'

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

t.test("a turn's lines reach sonic-boom in one write, in order, by the end of that turn", async (t) => {
  const { sonic, file, handed } = await recordedFile(t)
  const destination = new LogDestination(sonic)
  for (let n = 0; n < 300; n++) destination.write(line(n))
  t.same(handed, [], 'nothing handed over while the turn runs')
  await turn()
  t.equal(handed.length, 1, 'one write for the turn')
  for (let n = 300; n < 310; n++) destination.write(line(n))
  await turn()
  t.equal(handed.length, 2, 'the next turn, the next write')
  await flushLog(destination)
  const expected = Array.from({ length: 310 }, (_, n) => line(n)).join('')
  t.equal(readFileSync(file, 'utf8'), expected, 'every line written once, in order')
})

t.test('flush and flushSync write the lines of the turn still running', async (t) => {
  const { sonic, file } = await recordedFile(t)
  const destination = new LogDestination(sonic)
  destination.write(line(1))
  await flushLog(destination)
  t.equal(readFileSync(file, 'utf8'), line(1), 'flush: written before it calls back, in the same turn')
  destination.write(line(2))
  destination.flushSync()
  t.equal(readFileSync(file, 'utf8'), line(1) + line(2), 'flushSync: written before it returns')
  await turn()
  t.equal(readFileSync(file, 'utf8'), line(1) + line(2), 'and not written again at the end of the turn')
})

t.test('a quiet service: a single line is written within its turn, with no timer to wait for', async (t) => {
  const { sonic, file } = await recordedFile(t)
  const destination = new LogDestination(sonic)
  destination.write(line(7))
  await turn()
  // The write itself is asynchronous: it completes shortly after.
  for (let waited = 0; readFileSync(file, 'utf8') === '' && waited < 5000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(readFileSync(file, 'utf8'), line(7))
})
