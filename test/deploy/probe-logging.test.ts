import t from 'tap'
import { buildTestApp, postPlant, testConfig, untilMigrated } from '../helper.js'
import { buildApp } from '../../app.js'
import { loggerOptions } from '../../src/logger.js'
import { heldMigrationLock, needsPostgres } from '../support/postgres.js'

// Every engine and balancer probes every few seconds per replica. At the
// default level a probe writes nothing; at debug its lines are there; an
// unready probe never writes an error or a stack trace.
const DEBUG = 20
const INFO = 30

type Line = Record<string, unknown> & { level: number }

// The service's own logger settings (src/logger.ts), into memory.
function capture (logLevel: 'info' | 'debug'): { logger: object, lines: Line[] } {
  const lines: Line[] = []
  const logger = {
    ...(loggerOptions({ logLevel, production: true }) as object),
    stream: { write: (line: string) => { lines.push(JSON.parse(line) as Line) } }
  }
  return { logger, lines }
}

// Lines of a probe's request: the request id of any line naming the path.
function probeLines (lines: Line[]): Line[] {
  const ids = new Set(lines.filter((l) => JSON.stringify(l).includes('/health/')).map((l) => l.reqId))
  return lines.filter((l) => ids.has(l.reqId) || l.msg === 'readiness check failed')
}
const probe = async (app: { inject: (url: string) => Promise<{ statusCode: number }> }): Promise<number[]> =>
  [(await app.inject('/health/live')).statusCode, (await app.inject('/health/ready')).statusCode]

t.test('probes write nothing at info, their lines at debug; other requests stay at info', async (t) => {
  const quiet = capture('info')
  const { app } = await buildTestApp(t, 'pglite', { logLevel: 'info' }, quiet.logger)
  t.same(await probe(app), [200, 200])
  t.same(probeLines(quiet.lines), [], 'no line at info for either probe')
  await postPlant(app, '{"id": 1, "name": "Logged"}')
  t.ok(quiet.lines.some((l) => l.msg === 'request' && l.route === '/plants' && l.level === INFO), 'a create still logs its access line at info')

  const loud = capture('debug')
  const { app: debugApp } = await buildTestApp(t, 'pglite', { logLevel: 'debug' }, loud.logger)
  t.same(await probe(debugApp), [200, 200])
  const lines = probeLines(loud.lines)
  t.same(lines.filter((l) => l.msg === 'request').map((l) => [l.route, l.status]), [['/health/live', 200], ['/health/ready', 200]], 'each probe wrote its access line')
  t.ok(lines.every((l) => l.level === DEBUG), 'all at debug')
})

t.test('a probe while the database is gone: 503, nothing at info, no stack trace', async (t) => {
  const { logger, lines } = capture('info')
  const { app } = await buildTestApp(t, 'pglite', { logLevel: 'info' }, logger)
  await app.db.close()
  t.same(await probe(app), [200, 503])
  t.notOk(lines.some((l) => l.level > INFO), 'nothing at warn or error')
  t.same(probeLines(lines), [], 'nothing about the probes at info')
})

t.test('a probe before the migrations are applied: 503 at debug only, no stack trace', { skip: needsPostgres }, async (t) => {
  const { testDb, commit } = await heldMigrationLock(t)

  const { logger, lines } = capture('debug')
  const app = await buildApp({
    config: testConfig(testDb.database, { logLevel: 'debug' }),
    logger,
    background: { onFatal: (err) => t.fail(`migrations failed: ${String(err)}`) }
  })
  await app.ready()
  t.teardown(() => app.close())
  t.same(await probe(app), [200, 503])
  const lines503 = probeLines(lines)
  t.ok(lines503.some((l) => l.msg === 'not ready' && l.migrated === false), 'why it is not ready, at debug')
  t.ok(lines503.every((l) => l.level === DEBUG), 'every probe line at debug')
  t.notOk(lines.some((l) => l.level > INFO && JSON.stringify(l).includes('stack')), 'no stack trace above info')
  t.notOk(lines503.some((l) => l.err !== undefined), 'no error object in probe lines')
  await commit()
  await untilMigrated(app)
})
