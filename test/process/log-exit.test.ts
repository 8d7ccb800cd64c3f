import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'

// The service's log destination gathers lines into batches of 4 KiB. A process that exits without flushLog (a
// process.exit anywhere, close-with-grace's hard limit, an uncaught exception) still writes the batch it holds.
const LOGGER = new URL('../../src/logger.js', import.meta.url).href

async function runLogging (ending: string): Promise<{ code: number | null, lines: Array<Record<string, unknown>> }> {
  const script = `
    import pino from 'pino'
    import { logDestination, loggerOptions } from '${LOGGER}'
    const log = pino(loggerOptions({ logLevel: 'info', production: true }), logDestination())
    for (let n = 0; n < 3; n++) log.info({ n }, 'held in the batch')
    ${ending}
  `
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'ignore'] })
  const chunks: Buffer[] = []
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk))
  const [code] = await once(child, 'exit') as [number | null]
  const text = Buffer.concat(chunks).toString()
  return { code, lines: text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>) }
}

t.test('process.exit without a flush: the batch is written', async (t) => {
  const { code, lines } = await runLogging('process.exit(3)')
  t.equal(code, 3)
  t.same(lines.map((l) => l.n), [0, 1, 2], 'every line, in order, on stdout (a pipe)')
})

t.test('an uncaught exception: the batch is written', async (t) => {
  const { code, lines } = await runLogging('setImmediate(() => { throw new Error(\'unexpected\') })')
  t.equal(code, 1)
  t.same(lines.map((l) => l.n), [0, 1, 2], 'every line, in order, on stdout (a pipe)')
})
