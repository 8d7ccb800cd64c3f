import t from 'tap'
import { randomUUID } from 'node:crypto'
import { withClient } from '../support/database.js'
import { needsPostgres, sleep, storedRows } from '../support/postgres.js'
import { startServerProcess } from '../support/processes.js'
import { request } from '../support/http.js'
import { TOKEN } from '../helper.js'

// DATABASE_URL names a database that does not exist yet (SQLSTATE 3D000:
// it is created by a deploy step that runs after the service starts). The
// service waits for it as it waits for an unreachable server: it stays up,
// not ready, says so in the log, and becomes ready once the database exists.
t.test('a database that does not exist yet is waited for', { skip: needsPostgres }, async (t) => {
  const adminUrl = process.env.TEST_DATABASE_URL as string
  const name = `test_missing_${randomUUID().replaceAll('-', '')}`
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  t.teardown(() => withClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))

  const server = await startServerProcess({ databaseUrl: url.toString() })
  t.teardown(() => server.stop())
  await sleep(3000)
  t.equal(server.child.exitCode, null, 'still running 3 s after start-up')
  t.equal((await request(`${server.url}/health/live`)).status, 200, 'live')
  t.equal((await request(`${server.url}/health/ready`)).status, 503, 'not ready')
  const create = async () => await request(`${server.url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: '{"id": 1, "name": "after the database appeared"}'
  })
  t.equal((await create()).status, 503, 'a create meanwhile: 503')
  t.ok(server.logs.some((l) => l.level === 40 && /does not exist yet/.test(String(l.msg)) && l.code === '3D000'),
    'the log says the database does not exist yet, and that it retries')

  await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`))
  const started = Date.now()
  let ready = false
  while (!ready && Date.now() - started < 30_000) {
    ready = (await request(`${server.url}/health/ready`)).status === 200
    if (!ready) await sleep(250)
  }
  t.ok(ready, `ready ${Date.now() - started} ms after the database was created`)
  t.equal((await create()).status, 200, 'then a create is stored')
  t.ok((await storedRows(url.toString())).has('1'), 'and is in the database')
  t.equal(await server.stop(), 0, 'stops cleanly')
})
