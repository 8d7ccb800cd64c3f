import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer, type AddressInfo } from 'node:net'
import { freePort, stageRuntime, startBuiltServer, type ServerProcess } from '../support/processes.js'

const TOKEN = 'process-test-token'
const create = async (url: string, body: unknown, token = TOKEN) => {
  const res = await fetch(`${url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body)
  })
  return { status: res.status, body: await res.text() }
}

let runtime: string
t.before(async () => { runtime = await stageRuntime() })

// Starts the built server on a free port and waits until it is ready.
async function start (t: Test, env: Record<string, string>): Promise<ServerProcess & { url: string }> {
  const port = await freePort()
  const server = startBuiltServer(t, runtime, { LOG_LEVEL: 'info', PORT: String(port), ...env })
  const url = `http://127.0.0.1:${port}`
  await server.waitFor(`${url}/health/ready`)
  return Object.assign(server, { url })
}

t.test('the server keeps plants across a SIGTERM and a restart on the same PGlite directory', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'plant-store-data-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const env = { API_TOKENS: TOKEN, PGLITE_DATA_DIR: dataDir }

  const first = await start(t, env)
  t.same(await create(first.url, { id: 9007199254740993n.toString(), name: 'x' }).then((r) => r.status), 400, 'a string id is refused')
  const created = await create(first.url, { id: 42, name: 'Kept', tag: 'persist' })
  t.same(created, { status: 200, body: '{"name":"Kept","tag":"persist"}' })
  t.same(await first.stop('SIGTERM'), { code: 0, signal: null }, 'exits 0 on SIGTERM')
  t.match(first.stdout(), /shutting down/)

  const second = await start(t, env)
  t.same(await create(second.url, { id: 42, name: 'Kept', tag: 'persist' }), { status: 200, body: '{"name":"Kept","tag":"persist"}' }, 'the same plant replays')
  const conflict = await create(second.url, { id: 42, name: 'Replaced' })
  t.equal(conflict.status, 409, 'a conflicting create after restart answers 409')
  t.same(await second.stop('SIGINT'), { code: 0, signal: null }, 'exits 0 on SIGINT')
})

t.test('without a configured token a random one is generated and printed once', async (t) => {
  const server = await start(t, { PGLITE_DATA_DIR: 'memory://' })
  const output = server.stdout() + server.stderr()
  const printed = /Token: (\S+)/.exec(output)?.[1]
  t.ok(printed, 'a token is printed')
  t.equal(output.split(printed as string).length - 1, 2, 'printed in the token line and the curl example only')
  t.equal((await create(server.url, { id: 1, name: 'a' }, printed)).status, 200, 'the printed token works')
  t.equal((await create(server.url, { id: 2, name: 'a' }, 'guess')).status, 401)
  t.same(await server.stop(), { code: 0, signal: null })
})

t.test('a bad setting stops start-up with one line naming the variable', async (t) => {
  for (const [env, name] of [
    [{ PORT: 'abc' }, 'PORT'],
    [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL'],
    [{ API_TOKENS_FILE: '/nonexistent/tokens' }, 'API_TOKENS_FILE'],
    [{ HOST: '256.1.1.1' }, 'HOST'],
    [{ NODE_ENV: 'production' }, 'API_TOKENS'],
    // A file where the directory should be, and a parent that refuses new
    // entries (procfs, where Node's recursive mkdir would spin forever).
    [{ PGLITE_DATA_DIR: join(runtime, 'package.json') }, 'PGLITE_DATA_DIR'],
    [{ PGLITE_DATA_DIR: '/proc/plant-store/data' }, 'PGLITE_DATA_DIR']
  ] as Array<[Record<string, string>, string]>) {
    const server = startBuiltServer(t, runtime, { PGLITE_DATA_DIR: 'memory://', ...env })
    const { code } = await server.exited
    const output = server.stdout() + server.stderr()
    t.not(code, 0, `${name}: non-zero exit`)
    const lines = output.trim().split('\n')
    t.equal(lines.length, 1, `${name}: one line`)
    t.match(lines[0], new RegExp(`^plant-store: ${name}: `))
  }
})

t.test('a port in use or a HOST that is not this machine stops start-up with one line, before the database is touched', async (t) => {
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { taken.close() })
  const { port } = taken.address() as AddressInfo
  const free = await freePort()
  const cases: Array<[string, Record<string, string>, string]> = [
    ['PORT', { HOST: '127.0.0.1', PORT: String(port) }, `plant-store: PORT: ${port} is already in use on 127.0.0.1 (EADDRINUSE)`],
    ['METRICS_PORT', { HOST: '127.0.0.1', PORT: String(free), METRICS_PORT: String(port) }, `plant-store: METRICS_PORT: ${port} is already in use on 127.0.0.1 (EADDRINUSE)`],
    // TEST-NET-1 (RFC 5737): a valid address that no interface of this machine holds.
    ['HOST', { HOST: '192.0.2.1', PORT: String(free) }, 'plant-store: HOST: 192.0.2.1 is not an address of this machine (EADDRNOTAVAIL)'],
    ['HOST', { HOST: 'no-such-host.invalid', PORT: String(free) }, 'plant-store: HOST: no-such-host.invalid does not resolve to an address (ENOTFOUND)']
  ]
  for (const [name, env, line] of cases) {
    // At info, so that a migration or a fatal log line written first would show.
    const server = startBuiltServer(t, runtime, { LOG_LEVEL: 'info', API_TOKENS: TOKEN, PGLITE_DATA_DIR: 'memory://', ...env })
    t.same(await server.exited, { code: 1, signal: null }, `${name} ${env.HOST}: exits 1`)
    t.equal(server.stdout(), '', `${name} ${env.HOST}: no log line (no stack, no migrations applied)`)
    t.same(server.stderr().split('\n'), [line, ''], `${name} ${env.HOST}: one line on stderr`)
  }
})
