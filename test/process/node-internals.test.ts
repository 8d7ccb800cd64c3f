import t from 'tap'
import { join } from 'node:path'
import { backends, createTestDatabase, TOKEN } from '../helper.js'
import { checkNodeInternals } from '../../plugins/http-edge/node-internals.js'
import { answeredStatuses, rawExchange, request } from '../support/http.js'
import { root, startServerProcess } from '../support/processes.js'

// The private fields of Node's HTTP server the connection rules rely on
// are checked at start-up. On this Node they are all there; in a process
// where they are hidden (a preload plays a Node release that renamed them)
// the service says so in one warn line and keeps the contract's connection
// rules in a safe mode: nothing it did not answer is processed.

const PRELOAD = join(root, 'test/support/hide-node-internals.mjs')

const create = (id: number, token = TOKEN): string => {
  const body = JSON.stringify({ id, name: `internals ${id}` })
  return `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

t.test('on this Node every private field is there and behaves as relied on', async (t) => {
  const started = performance.now()
  const check = await checkNodeInternals()
  t.same(check, { ok: true, failed: [] })
  t.comment(`figures: the start-up check took ${Math.round(performance.now() - started)} ms`)
})

for (const backend of backends()) {
  t.test(`with Node's private fields hidden, on ${backend}: one warning, safe mode`, async (t) => {
    const db = await createTestDatabase(backend)
    const server = await startServerProcess({
      ...(db.url === undefined ? {} : { databaseUrl: db.url }),
      env: {
        NODE_OPTIONS: `--import=${PRELOAD}`,
        // Under c8 the safe mode's code counts toward coverage too.
        ...(process.env.NODE_V8_COVERAGE === undefined ? {} : { NODE_V8_COVERAGE: process.env.NODE_V8_COVERAGE })
      }
    })
    t.teardown(async () => {
      await server.stop()
      await db.drop()
    })
    const port = Number(new URL(server.url).port)
    // On PostgreSQL the service listens while its migrations still run.
    for (let waited = 0; waited < 30_000; waited += 200) {
      if ((await request(`${server.url}/health/ready`).catch(() => undefined))?.status === 200) break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    // Stored or not, asked through the API: a different plant under a
    // stored id is 409, under a free one 200.
    const stored = async (id: number): Promise<boolean> => (await request(`${server.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id, name: 'was it stored?' })
    })).status === 409

    const warnings = server.logs.filter((l) => l.level === 40)
    t.equal(warnings.length, 1, 'exactly one warn line')
    t.match(String(warnings[0]?.msg), /safe mode/, 'saying the service runs in safe mode')
    t.match(JSON.stringify(warnings[0]?.failed), /_httpMessage/, 'and naming what failed')

    await t.test('create, bad-token create, create in one packet: nothing stored that was not answered 200', async (t) => {
      const out = await rawExchange(port, [{ data: create(7001) + create(7002, 'wrong') + create(7003) }], 10_000)
      const answers = answeredStatuses(out.response)
      t.same(answers.slice(0, 1), [200], 'the first create is answered 200')
      t.ok(out.closedByServer, 'then the connection closes')
      await new Promise((resolve) => setTimeout(resolve, 300))
      t.ok(await stored(7001), 'the first create is stored')
      t.notOk(await stored(7002), 'the bad-token create is not')
      t.equal(await stored(7003), answers.length === 3 && answers[2] === 200, 'the third is stored only if it was answered 200')
    })

    await t.test('a closing answer in front of a create in one packet: the create is not processed', async (t) => {
      const front = 'PUT /plants HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'
      const out = await rawExchange(port, [{ data: front + create(7101) }], 10_000)
      t.same(answeredStatuses(out.response), [405])
      await new Promise((resolve) => setTimeout(resolve, 300))
      t.notOk(await stored(7101))
    })

    await t.test('one request at a time on a keep-alive connection still works', async (t) => {
      const out = await rawExchange(port, [
        { data: create(7201) },
        { delayMs: 500, data: create(7202).replace('Host: localhost', 'Host: localhost\r\nConnection: close') }
      ], 10_000, true)
      t.same(answeredStatuses(out.response), [200, 200])
    })

    t.equal(server.logs.filter((l) => l.level === 40).length, 1, 'still exactly one warn line')
  })
}

t.test('with the fields in place no warning is logged', async (t) => {
  const server = await startServerProcess({})
  t.teardown(async () => { await server.stop() })
  t.same(server.logs.filter((l) => Number(l.level) >= 40), [], 'no warn line')
})
