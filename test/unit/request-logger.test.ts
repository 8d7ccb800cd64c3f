import t from 'tap'
import pino from 'pino'
import { Writable } from 'node:stream'
import { requestLogger } from '../../src/logger.js'

// A pino logger writing its lines into an array, and counting the children it makes.
function capture (level: string): { logger: pino.Logger, lines: Array<Record<string, unknown>>, children: () => number } {
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>)
      done()
    }
  })
  const logger = pino({ level }, stream)
  let made = 0
  // pino's children inherit this method: `this` is whichever logger it is called on.
  const child = logger.child
  logger.child = function (this: pino.Logger, ...args: Parameters<typeof child>) {
    made++
    return child.apply(this, args)
  } as typeof logger.child
  return { logger, lines, children: () => made }
}

t.test('a request logger makes its pino child only for a line that is written', async (t) => {
  const { logger, lines, children } = capture('warn')
  const log = requestLogger(logger, { reqId: 'r-1' }, {})
  log.info({ plantId: '1' }, 'plant create')
  log.debug('nothing')
  t.equal(children(), 0, 'lines below the level make no child')
  t.equal(log.level, 'warn')
  const pinoLog = log as typeof log & { isLevelEnabled: (l: string) => boolean, bindings: () => object }
  t.equal(pinoLog.isLevelEnabled('info'), false)
  t.equal(pinoLog.isLevelEnabled('error'), true)
  t.equal(children(), 0, 'asking a level makes no child')
  t.same(pinoLog.bindings(), { reqId: 'r-1' })
  log.warn({ status: 503 }, 'refused %s', 'now')
  log.error('second')
  t.equal(children(), 1, 'the first line written (or bindings asked) makes the child, once')
  t.match(lines, [
    { level: 40, reqId: 'r-1', status: 503, msg: 'refused now' },
    { level: 50, reqId: 'r-1', msg: 'second' }
  ])
  t.equal(lines.length, 2)
})

t.test('its children carry the request bindings and their own', async (t) => {
  const { logger, lines } = capture('info')
  const log = requestLogger(logger, { reqId: 'r-2' }, {}).child({ trace_id: 'abc' })
  log.info('with trace')
  t.match(lines, [{ reqId: 'r-2', trace_id: 'abc', msg: 'with trace' }])
})

t.test('a route log level, or a logger that is not pino, gets a real child at once', async (t) => {
  const { logger, lines, children } = capture('warn')
  const log = requestLogger(logger, { reqId: 'r-3' }, { level: 'debug' })
  t.equal(children(), 1)
  log.debug('route level')
  t.match(lines, [{ reqId: 'r-3', msg: 'route level' }])
  const plain = { level: 'info', child: () => plain } as unknown as Parameters<typeof requestLogger>[0]
  t.equal(requestLogger(plain, { reqId: 'r-4' }, {}), plain)
})

t.test('every level and the rest of the logger reach the real child', async (t) => {
  const { logger, lines } = capture('trace')
  const log = requestLogger(logger, { reqId: 'r-5' }, {}) as ReturnType<typeof requestLogger> & { flush: (cb: () => void) => void }
  log.trace('t')
  log.debug('d')
  log.fatal('f')
  log.silent('s')
  t.same(lines.map((l) => [l.level, l.msg, l.reqId]), [[10, 't', 'r-5'], [20, 'd', 'r-5'], [60, 'f', 'r-5']])
  log.level = 'error'
  t.equal(log.level, 'error', 'a level set applies to this request only')
  log.info('dropped')
  t.equal(lines.length, 3)
  t.equal(logger.level, 'trace')
  await new Promise<void>((resolve) => log.flush(resolve))
})
