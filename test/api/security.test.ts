import t, { type Test } from 'tap'
import { Writable } from 'node:stream'
import { writeFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { loadConfig } from '../../src/config.js'
import { loggerOptions } from '../../src/logger.js'
import { staticCallers } from '../../plugins/auth.js'
import type { Db, Sql } from '../../src/store/db.js'
import { assertErrorShape, forEachBackend, buildTestApp, jsonHeaders, OTHER_TOKEN, postPlant, TOKEN, type TestApp } from '../helper.js'
import { withClient } from '../support/database.js'

// Tokens that are wrong here but could be real somewhere: they must not be
// logged either.
const WRONG_TOKEN = 'wrong-token-0f9e8d7c6b5a'
const SECRETS = [TOKEN, OTHER_TOKEN, WRONG_TOKEN]
// A plant name sent with the creates that fail: bodies are not logged.
const CLIENT_DATA = 'client-data-7a6b'

// Text that would betray internals in a response.
const LEAKS = [/insert/i, /select/i, /relation/i, /plants/i, /\$1/, /\bat [\w.<>]+ \(/, /\.ts:\d+/, /\.js:\d+/, /pglite|postgres|pg-pool/i, /stack/i]

function assertNoLeak (t: Test, body: string): void {
  for (const secret of SECRETS) t.notOk(body.includes(secret), 'no token in the response')
  for (const pattern of LEAKS) t.notMatch(body, pattern, `no ${pattern} in the response`)
}

// Captures the service's log exactly as production writes it (the same
// pino options, redaction included) at the most verbose level.
function captureLog (): { logger: object, text: () => string } {
  const chunks: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString())
      done()
    }
  })
  return {
    logger: { ...(loggerOptions({ logLevel: 'trace', production: true }) as object), stream },
    text: () => chunks.join('')
  }
}

// Makes the database unavailable: PGlite is closed; on PostgreSQL another
// session holds the table locked, so the create outlasts DB_TIMEOUT_MS.
async function makeUnavailable (h: TestApp): Promise<() => Promise<void>> {
  if (h.backend === 'pglite') {
    await h.app.db.close()
    return async () => {}
  }
  const { default: pg } = await import('pg')
  const locker = new pg.Client({ connectionString: h.testDb.url })
  await locker.connect()
  await locker.query('BEGIN')
  await locker.query('LOCK TABLE plants IN ACCESS EXCLUSIVE MODE')
  return async () => {
    await locker.query('ROLLBACK')
    await locker.end()
  }
}

// Makes every create fail unexpectedly: the table is gone.
async function breakSchema (h: TestApp): Promise<void> {
  if (h.backend === 'pglite') await h.app.db.exec('DROP TABLE plants')
  else await withClient(h.testDb.url as string, (c) => c.query('DROP TABLE plants'))
}

// Records every statement the service sends through its Db (the interface
// both drivers implement), including those inside transactions.
function recordStatements (db: Db): Array<{ text: string, params: unknown[] }> {
  const seen: Array<{ text: string, params: unknown[] }> = []
  const wrap = (sql: Sql): void => {
    const query = sql.query.bind(sql)
    const exec = sql.exec.bind(sql)
    sql.query = async (text: string, params?: unknown[]) => {
      seen.push({ text, params: params ?? [] })
      return await query(text, params)
    }
    sql.exec = async (text: string) => {
      seen.push({ text, params: [] })
      await exec(text)
    }
  }
  wrap(db)
  const transaction = db.transaction.bind(db)
  db.transaction = async (fn) => await transaction(async (tx) => {
    wrap(tx)
    return await fn(tx)
  })
  return seen
}

async function send (app: FastifyInstance, body: string, headers: Record<string, string>) {
  return await app.inject({ method: 'POST', url: '/plants', headers, payload: body })
}

forEachBackend(t, 'security', async (t, backend) => {
  const log = captureLog()
  const h = await buildTestApp(t, backend, {}, log.logger as never)
  const { app } = h

  await t.test('SQL carries client data only as parameters', async (t) => {
    const seen = recordStatements(app.db)
    const marker = 'mark-5d1c'
    const name = `x'); DROP TABLE plants; -- ${marker}`
    const tag = `$1 ' " \\ ; ${marker}`
    const res = await postPlant(app, JSON.stringify({ id: 4242, name, tag }))
    t.equal(res.statusCode, 200)
    t.equal(res.body, JSON.stringify({ name, tag }), 'stored and answered exactly')
    const replay = await postPlant(app, JSON.stringify({ id: 4242, name, tag }))
    t.equal(replay.statusCode, 200, 'a replay reads it back')
    t.ok(seen.some((s) => s.params.some((p) => String(p).includes(marker))), 'the recorder saw the values, as parameters')
    t.same(seen.filter((s) => s.text.includes(marker)).map((s) => s.text), [], 'no statement text holds client data')
    t.same((await h.rows()).find((r) => r.id === '4242'), { id: '4242', name, tag }, 'the row is exact; the table still stands')
  })

  await t.test('every configured token is accepted; near misses are not', async (t) => {
    for (const token of [TOKEN, OTHER_TOKEN]) {
      t.equal((await postPlant(app, '{"id": 1, "name": "t"}', jsonHeaders(token))).statusCode, 200, 'configured token accepted')
    }
    for (const token of [TOKEN.slice(0, -1), `${TOKEN}x`, TOKEN.toUpperCase(), `${TOKEN}${OTHER_TOKEN}`, WRONG_TOKEN]) {
      const res = await postPlant(app, '{"id": 1, "name": "t"}', jsonHeaders(token))
      assertErrorShape(t, res, 401)
      assertNoLeak(t, res.body)
    }
  })

  await t.test('ordinary errors answer without internals', async (t) => {
    const cases: Array<[string, Record<string, string>, number]> = [
      ['{"id": 1, "name": "other"}', jsonHeaders(), 409],
      ['{"id": "1", "name": "x"}', jsonHeaders(), 400],
      ['{"id": 1, "name": "x"', jsonHeaders(), 400],
      ['{"id": 1}', { ...jsonHeaders(), 'content-type': 'text/plain' }, 415],
      ['{}', { authorization: `Basic ${TOKEN}`, 'content-type': 'application/json' }, 401],
      ['{}', { authorization: TOKEN, 'content-type': 'application/json' }, 401],
      ['{}', { authorization: `Token ${WRONG_TOKEN}`, 'content-type': 'application/json' }, 401]
    ]
    for (const [body, headers, status] of cases) {
      const res = await send(app, body, headers)
      assertErrorShape(t, res, status)
      assertNoLeak(t, res.body)
    }
  })

  let failedRequestIds: string[] = []
  await t.test('a 503 and a 500 answer without token, SQL or stack', async (t) => {
    // PGlite can only be made unavailable by closing it, so the 500 comes first there.
    const order = backend === 'pglite' ? ['500', '503'] : ['503', '500']
    for (const kind of order) {
      if (kind === '503') {
        const release = await makeUnavailable(h)
        const res = await postPlant(app, `{"id": 77, "name": "${CLIENT_DATA}"}`)
        await release()
        const body = assertErrorShape(t, res, 503)
        t.equal(res.headers['retry-after'], '5', 'with Retry-After')
        t.notMatch(body.message, /took longer|timeout|closed|terminated/i, 'a generic message')
        assertNoLeak(t, res.body)
        failedRequestIds.push(String(res.headers['x-request-id']))
      } else {
        await breakSchema(h)
        const res = await postPlant(app, `{"id": 78, "name": "${CLIENT_DATA}"}`)
        const body = assertErrorShape(t, res, 500)
        t.equal(body.message, 'Internal Server Error', 'a generic message')
        assertNoLeak(t, res.body)
        failedRequestIds.push(String(res.headers['x-request-id']))
      }
    }
  })

  await t.test('no token reaches the log, at trace level, while the details of failures do', async (t) => {
    // Should code ever log headers, redaction still removes the token.
    app.log.info({ headers: { authorization: `Bearer ${TOKEN}` } }, 'headers logged by mistake')
    const text = log.text()
    const lines = text.split('\n').filter((l) => l.length > 0)
    t.ok(lines.length > 30, `${lines.length} log lines captured`)
    for (const secret of SECRETS) t.notOk(text.includes(secret), `the log never holds ${secret.slice(0, 6)}…`)
    t.match(text, /\[redacted\]/, 'a logged Authorization header is redacted')
    t.notOk(text.includes(CLIENT_DATA), 'nor the plant data of a failed create')
    const failures = lines.map((l) => JSON.parse(l) as { reqId?: string, level: number, err?: { message?: string } })
      .filter((l) => l.level >= 40 && l.err !== undefined && failedRequestIds.includes(String(l.reqId)))
    t.equal(new Set(failures.map((l) => l.reqId)).size, failedRequestIds.length, 'each failure is logged with its request id and the error')
    failedRequestIds = []
  })
})

t.test('tokens can be rotated without downtime: several are accepted at once', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-tokens-'))
  const file = join(dir, 'tokens')
  writeFileSync(file, 'new-token-from-file\n\nold-token-from-file\n')

  const both = loadConfig({ API_TOKENS: 'old-token, new-token', NODE_ENV: 'production' }).config.apiTokens
  t.same(both, ['old-token', 'new-token'], 'API_TOKENS is comma-separated')
  const fromFile = loadConfig({ API_TOKENS_FILE: file, NODE_ENV: 'production' }).config.apiTokens
  t.same(fromFile, ['new-token-from-file', 'old-token-from-file'], 'API_TOKENS_FILE holds one a line')

  const tokenMatcher = (tokens: string[]) => {
    const callerOf = staticCallers(tokens)
    return (candidate: string): boolean => callerOf(candidate) !== undefined
  }
  const during = tokenMatcher(both)
  t.ok(during('old-token') && during('new-token'), 'during the rotation both are accepted')
  const after = tokenMatcher(['new-token'])
  t.ok(after('new-token') && !after('old-token'), 'after it only the new one')
  for (const near of ['new-toke', 'new-tokenx', 'NEW-TOKEN', ' new-token', '', 'new-token\u0000']) {
    t.notOk(after(near), `near miss ${JSON.stringify(near)} refused`)
  }
})
