import t from 'tap'
import pino from 'pino'
import { bindingsJson, RequestLogger } from '../../src/logger.js'

// The request's logger (src/logger.ts) stands for pino's child until one is
// needed; these pin what it answers before and after.
function parentWithLines (): { parent: pino.Logger, lines: () => Array<Record<string, unknown>> } {
  const raw: string[] = []
  const parent = pino({ level: 'info', base: undefined, timestamp: false }, { write: (line: string) => raw.push(line) })
  return { parent, lines: () => raw.map((line) => JSON.parse(line) as Record<string, unknown>) }
}

t.test('the level is the parent\'s until it is set, which makes the child', async (t) => {
  const { parent, lines } = parentWithLines()
  const log = new RequestLogger(parent, { reqId: 'r-1' })
  t.equal(log.level, 'info')
  t.notOk(log.isLevelEnabled('debug'))
  t.equal(log.made, undefined, 'no child yet')
  log.level = 'debug'
  t.not(log.made, undefined, 'setting the level made the child')
  t.equal(log.level, 'debug')
  t.ok(log.isLevelEnabled('debug'))
  t.equal(parent.level, 'info', 'the parent keeps its own level')
  log.debug('hello')
  t.same(lines(), [{ level: 20, reqId: 'r-1', msg: 'hello' }])
})

t.test('each level and a child of it write through one child of pino, with the bindings', async (t) => {
  const { parent, lines } = parentWithLines()
  parent.level = 'trace'
  const log = new RequestLogger(parent, { reqId: 'r-2', trace_id: 'abc' })
  for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const) log[level]({ n: 1 }, level)
  const made = log.made
  log.child({ part: 'x' }).info('from a child')
  t.equal(log.made, made, 'the same child for every line')
  t.same(lines().map((l) => [l.msg, l.reqId, l.trace_id]), [
    ...['fatal', 'error', 'warn', 'info', 'debug', 'trace'].map((msg) => [msg, 'r-2', 'abc']),
    ['from a child', 'r-2', 'abc']
  ])
  t.equal(lines().at(-1)?.part, 'x')
})

t.test('without levels (logging off) every level counts as enabled', async (t) => {
  const silent = { child: () => silent, level: 'silent' } as unknown as pino.Logger
  t.ok(new RequestLogger(silent, { reqId: 'r-3' }).isLevelEnabled('info'))
})

t.test('bindingsJson is what pino appends for a child\'s bindings', async (t) => {
  const { parent } = parentWithLines()
  const bindings = { reqId: 'a"b\\c', trace_id: 'abc', gone: undefined }
  const child = parent.child(bindings) as unknown as Record<symbol, string>
  t.equal(bindingsJson(bindings), child[pino.symbols.chindingsSym])
  t.equal(bindingsJson(bindings), ',"reqId":"a\\"b\\\\c","trace_id":"abc"')
  t.equal(bindingsJson({}), '', 'no bindings, no text')
})
