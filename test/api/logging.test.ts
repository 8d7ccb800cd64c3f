import t from 'tap'
import { forEachBackend, buildTestApp, listeningTestApp, postPlant, TOKEN, auth, jsonHeaders } from '../helper.js'
import { parseRawResponse, rawExchange } from '../support/http.js'
import pino from 'pino'
import { loggerOptions } from '../../src/logger.js'

type Line = Record<string, unknown>

// The service's own logger settings (src/logger.ts), into memory.
function capture (logLevel: 'info' | 'trace'): { logger: object, lines: Line[], raw: string[] } {
  const raw: string[] = []
  const lines: Line[] = []
  const logger = {
    ...(loggerOptions({ logLevel, production: true }) as object),
    stream: { write: (line: string) => { raw.push(line); lines.push(JSON.parse(line) as Line) } }
  }
  return { logger, lines, raw }
}

const ACCESS_FIELDS = ['durationMs', 'hostname', 'level', 'method', 'msg', 'pid', 'reqId', 'route', 'status', 'time']

forEachBackend(t, 'one access line per request at info', async (t, backend) => {
  const { logger, lines, raw } = capture('info')
  const { app } = await buildTestApp(t, backend, { logLevel: 'info' }, logger)
  const headers = (id: string): Record<string, string> => ({ ...jsonHeaders(), 'x-request-id': id })

  t.equal((await postPlant(app, '{"id": 1, "name": "Secret Fern", "tag": "hidden-tag"}', headers('create-1'))).statusCode, 200)
  t.equal((await postPlant(app, '{"id": 1, "name": "Secret Fern", "tag": "hidden-tag"}', headers('replay-1'))).statusCode, 200)
  t.equal((await postPlant(app, '{"id": 1, "name": "Other Secret"}', headers('conflict-1'))).statusCode, 409)
  t.equal((await postPlant(app, '{"id": "bad"}', headers('invalid-1'))).statusCode, 400)
  await app.inject({ method: 'POST', url: '/plants', headers: { authorization: `Bearer ${TOKEN}x`, 'content-type': 'application/json', 'x-request-id': 'unauth-1' }, payload: '{}' })
  await app.inject({ url: '/nope', headers: { ...auth(), 'x-request-id': 'nope-1' } })

  const access = (reqId: string): Line[] => lines.filter((l) => l.reqId === reqId && l.msg === 'request')
  for (const id of ['create-1', 'replay-1', 'conflict-1', 'invalid-1', 'unauth-1', 'nope-1']) {
    t.equal(access(id).length, 1, `${id}: exactly one access line`)
  }
  const created = access('create-1')[0] as Line
  t.same(Object.keys(created).sort(), [...ACCESS_FIELDS, 'outcome'].sort(), 'the access line holds these fields and no others')
  t.match(created, { level: 30, method: 'POST', route: '/plants', status: 200, outcome: 'created' })
  t.ok(typeof created.durationMs === 'number' && created.durationMs >= 0, 'with its duration in ms')
  t.match(access('replay-1')[0], { status: 200, outcome: 'replayed' })
  t.match(access('conflict-1')[0], { status: 409, outcome: 'conflict' })
  t.match(access('invalid-1')[0], { status: 400, route: '/plants' })
  t.notOk('outcome' in (access('invalid-1')[0] as Line), 'no outcome when the store was not asked')
  t.match(access('unauth-1')[0], { status: 401 })
  t.match(access('nope-1')[0], { method: 'GET', route: null, status: 404 })

  // Errors keep their own line besides the access line.
  t.ok(lines.some((l) => l.reqId === 'conflict-1' && l.msg === 'request rejected' && l.status === 409), 'a conflict is also logged as rejected')
  t.equal(lines.filter((l) => l.reqId === 'create-1').length, 1, 'a create that succeeds writes only its access line')
  t.notOk(lines.some((l) => ['incoming request', 'request completed', 'plant create'].includes(l.msg as string)), 'none of the old request lines')
  t.notOk(raw.some((l) => l.includes(TOKEN)), 'no line holds a token')
  t.notOk(raw.some((l) => /Secret|hidden-tag/.test(l)), 'no line holds plant data')
  t.ok(lines.every((l) => l.msg !== 'request' || typeof l.reqId === 'string'), 'every access line carries the request id')
})

t.test("a request makes pino's child only when it logs a line of its own", async (t) => {
  const { logger, lines } = capture('info')
  const { app } = await buildTestApp(t, 'pglite', { logLevel: 'info' }, logger)
  const root = app.log as unknown as { child: (...args: unknown[]) => unknown }
  const child = root.child
  let children = 0
  root.child = function (this: unknown, ...args: unknown[]) {
    children++
    return child.apply(this, args)
  }
  const headers = (id: string): Record<string, string> => ({ ...jsonHeaders(), 'x-request-id': id })
  // The first access line on a stream checks it against pino's (with a child).
  t.equal((await postPlant(app, '{"id": 2, "name": "Fern"}', headers('lazy-0'))).statusCode, 200)
  children = 0
  t.equal((await postPlant(app, '{"id": 1, "name": "Fern"}', headers('lazy-1'))).statusCode, 200)
  t.equal(children, 0, 'a create that logs only its access line made no child')
  t.match(lines.filter((l) => l.reqId === 'lazy-1'), [{ msg: 'request', status: 200, outcome: 'created' }], 'and wrote its access line with its request id')
  t.equal((await postPlant(app, '{"id": 1, "name": "Other"}', headers('lazy-2'))).statusCode, 409)
  t.equal(children, 1, 'a conflict, logged as rejected, made one')
  t.match(lines.filter((l) => l.reqId === 'lazy-2').map((l) => l.msg), ['request rejected', 'request'], 'both of its lines carry its request id')
})

t.test('probes and everything else at trace: probes at debug, still one access line each', async (t) => {
  const { logger, lines } = capture('trace')
  const { app } = await buildTestApp(t, 'pglite', { logLevel: 'trace' }, logger)
  await app.inject({ url: '/health/ready', headers: { 'x-request-id': 'trace-me-42' } })
  const probe = lines.filter((l) => l.reqId === 'trace-me-42')
  t.match(probe, [{ level: 20, msg: 'request', method: 'GET', route: '/health/ready', status: 200 }], 'one line, at debug')
})

t.test('answers given outside Fastify write an access line of the same shape', async (t) => {
  const { logger, lines } = capture('info')
  const { port } = await listeningTestApp(t, 'pglite', { logger })
  const answers: Array<[string, string, number, Record<string, unknown>]> = [
    ['malformed HTTP', 'THIS IS NOT HTTP\r\n\r\n', 400, { reason: 'malformed HTTP' }],
    ['an unmet Expect', `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}`, 417, { method: 'POST', route: null }]
  ]
  for (const [what, data, status, fields] of answers) {
    const res = parseRawResponse((await rawExchange(port, [{ data }], 5000)).response)
    t.equal(res?.status, status, `${what}: ${status}`)
    const reqId = res?.headers['x-request-id']
    t.match(lines.filter((l) => l.reqId === reqId), [{ level: 30, msg: 'request', status, ...fields }], `${what}: one access line under the answer's request id`)
  }
  t.notOk(lines.some((l) => JSON.stringify(l).includes(TOKEN)), 'no token')
})

// The access line at info is formatted by access-log.ts from pino's own
// pieces; these pin it to the bytes pino itself writes.
t.test("the access line is byte for byte pino's own line, and left to pino when its options change it", async (t) => {
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e4736aa-00f067aa0ba902b7-01'
  const send = async (app: Awaited<ReturnType<typeof buildTestApp>>['app'], reqId: string): Promise<void> => {
    const res = await postPlant(app, '{"id": 7, "name": "Fern"}', { ...jsonHeaders(), 'x-request-id': reqId, traceparent })
    t.equal(res.statusCode, 200)
  }
  const { logger, raw } = capture('info')
  const { app } = await buildTestApp(t, 'pglite', { logLevel: 'info' }, logger)
  // The first line of a stream is also formatted by pino once, to check
  // that both give the same bytes.
  await send(app, 'warm-1')
  const formattedByPino = countPinoFormatting(app.log)
  await send(app, 'direct-1')
  t.same(formattedByPino(), [], 'the access line did not go through pino\'s formatter')
  const direct = raw.filter((l) => l.includes('"reqId":"direct-1"'))
  t.equal(direct.length, 1, 'one line')
  const line = direct[0] as string
  const parsed = JSON.parse(line) as Line
  t.equal(parsed.trace_id, '4bf92f3577b34da6a3ce929d0e4736aa', 'the trace id, from the request logger')
  // What pino writes for the same fields, through the same request logger.
  const pinoLine: string[] = []
  const requestLog = app.log.child({ reqId: 'direct-1', trace_id: parsed.trace_id }) as unknown as Record<symbol, unknown> & { info: (o: object, m: string) => void }
  const probe = Object.create(requestLog, {
    [pino.symbols.streamSym]: { value: { write: (l: string) => pinoLine.push(l) } },
    [pino.symbols.timeSym]: { value: () => `,"time":${String(parsed.time)}` }
  }) as typeof requestLog
  probe.info({ method: parsed.method, route: parsed.route, status: parsed.status, durationMs: parsed.durationMs, outcome: parsed.outcome }, 'request')
  t.equal(line, pinoLine[0], 'the same bytes as pino')

  // Loggers whose options change pino's line: pino writes it.
  const changes: Array<[string, object]> = [
    ['formatters', { formatters: { log: (o: object) => ({ ...o, zone: 'a' }) } }],
    ['a mixin', { mixin: () => ({ zone: 'a' }) }]
  ]
  for (const [what, option] of changes) {
    const other = capture('info')
    const built = await buildTestApp(t, 'pglite', { logLevel: 'info' }, { ...other.logger, ...option })
    await send(built.app, 'warm-1')
    const viaPinoFormatter = countPinoFormatting(built.app.log)
    await send(built.app, 'changed-1')
    const lines = other.lines.filter((l) => l.reqId === 'changed-1' && l.msg === 'request')
    t.match(lines, [{ zone: 'a', method: 'POST', status: 200, outcome: 'replayed' }], `${what}: the field it adds is there`)
    t.same(viaPinoFormatter(), ['request'], `${what}: pino formatted the access line`)
  }
})

// The messages of the lines pino's own formatter formats from now on, for
// every logger made from `root` (its children find it through the root).
function countPinoFormatting (root: object): () => string[] {
  const logger = root as Record<symbol, unknown>
  const asJson = logger[pino.symbols.asJsonSym] as (this: unknown, obj: object, msg: unknown, ...rest: unknown[]) => string
  const messages: string[] = []
  logger[pino.symbols.asJsonSym] = function (this: unknown, obj: object, msg: unknown, ...rest: unknown[]) {
    if (msg === 'request') messages.push(msg)
    return asJson.call(this, obj, msg, ...rest)
  }
  return () => messages
}
