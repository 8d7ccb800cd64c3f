import t from 'tap'
import { buildStubApp, listeningStubApp, postPlant, TOKEN, auth, jsonHeaders } from '../helper.js'
import { parseRawResponse, rawExchange } from '../support/http.js'
import Fastify from 'fastify'
import { loggerOptions } from '../../src/logger.js'
import accessLog, { ACCESS_LINE, loggingOptions } from '../../plugins/access-log.js'
import { staticCallerName } from '../../plugins/auth.js'

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

// What is logged depends on the store's answer, never on the database that
// gave it: all of this runs over the stub store (test/support/stub-store.ts).
t.test('one access line per request at info', async (t) => {
  const { logger, lines, raw } = capture('info')
  const { app } = await buildStubApp(t, { logLevel: 'info' }, logger)
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
  t.same(Object.keys(created).sort(), [...ACCESS_FIELDS, 'caller', 'outcome'].sort(), 'the access line holds these fields and no others')
  t.match(created, { level: 30, method: 'POST', route: '/plants', status: 200, caller: staticCallerName(TOKEN), outcome: 'created' })
  t.notOk('caller' in (access('unauth-1')[0] as Line), 'no caller when the token was refused')
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

t.test('probes and everything else at trace: probes at debug, still one access line each', async (t) => {
  const { logger, lines } = capture('trace')
  const { app } = await buildStubApp(t, { logLevel: 'trace' }, logger)
  await app.inject({ url: '/health/ready', headers: { 'x-request-id': 'trace-me-42' } })
  const probe = lines.filter((l) => l.reqId === 'trace-me-42')
  t.match(probe, [{ level: 20, msg: 'request', method: 'GET', route: '/health/ready', status: 200 }], 'one line, at debug')
})

t.test('answers given outside Fastify write an access line of the same shape', async (t) => {
  const { logger, lines } = capture('info')
  const { port } = await listeningStubApp(t, { logger })
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

// The bearer hook names the caller and the route notes a create's outcome:
// both reach the access line through the request's decorators, with the
// trace id the request's logger carries.
t.test('the access line carries the caller and the outcome noted on the request', async (t) => {
  const { logger, lines } = capture('info')
  const app = Fastify(loggingOptions(logger))
  t.teardown(() => app.close())
  await app.register(accessLog)
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.headers['x-caller'] === 'yes') request.caller = 'inventory-sync'
    done()
  })
  app.post('/plants', async (request) => {
    request.createOutcome = 'created'
    return {}
  })
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e4736aa-00f067aa0ba902b7-01'
  await app.inject({ method: 'POST', url: '/plants', headers: { 'x-caller': 'yes', traceparent } })
  await app.inject({ method: 'POST', url: '/plants' })
  t.match(lines.filter((l) => l.msg === ACCESS_LINE), [
    { level: 30, route: '/plants', status: 200, caller: 'inventory-sync', outcome: 'created', trace_id: '4bf92f3577b34da6a3ce929d0e4736aa' },
    { level: 30, route: '/plants', status: 200, outcome: 'created' }
  ])
  t.notOk('caller' in (lines.filter((l) => l.msg === ACCESS_LINE)[1] as Line), 'no caller field when none was noted')
})

t.test('a malformed body is never quoted in the 400 or the log, short or long', async (t) => {
  const { logger, raw } = capture('info')
  const { app } = await buildStubApp(t, { logLevel: 'info' }, logger)
  // V8 quotes a body of 20 characters or fewer whole, and a longer one around the fault.
  for (const body of ['Ficus at position 1', 'Ficus', `{"name": "Ficus", "tag": Ficus${'x'.repeat(40)}}`]) {
    const res = await app.inject({ method: 'POST', url: '/plants', headers: jsonHeaders(), payload: body })
    t.equal(res.statusCode, 400)
    t.notMatch(res.body, /Ficus/, `the 400 to ${JSON.stringify(body.slice(0, 25))}: ${res.body}`)
  }
  t.notOk(raw.some((l) => l.includes('Ficus')), 'no log line holds the body')
})
