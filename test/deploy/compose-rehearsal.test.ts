import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { backends, createTestDatabase, type BackendName } from '../helper.js'
import { needsPostgres } from '../support/postgres.js'
import { environmentOf, healthcheckArgv, readCompose, root, secretMounts, service } from '../support/compose-file.js'
import { execForm, last, parseDockerfile, splitFlags, stagesOf, type Stage } from '../support/dockerfile.js'
import { freePort, jsonLines, spawnProcess, stageRuntime, startBuiltServer, type ServerProcess } from '../support/processes.js'
import { storedPlants, withClient } from '../support/database.js'

// What `docker compose up` would run, rehearsed without an engine: the app
// service's environment from docker-compose.yml, each mounted secret as a
// temporary file at a local path, the built server started as the image's
// CMD starts it, and the compose and Dockerfile healthchecks run as the
// engine runs them. Only DATABASE_URL (the local PostgreSQL, or PGlite when
// none is configured), PORT and METRICS_PORT (free ones) differ from the file.
const compose = readCompose()
const app = service(compose, 'app')
const composeEnv = environmentOf(app)
const mounts = secretMounts(app)
const finalStage = stagesOf(parseDockerfile(readFileSync(join(root, 'Dockerfile'), 'utf8'))).at(-1) as Stage
const imageHealthcheck = execForm(splitFlags(last(finalStage, 'HEALTHCHECK')?.args ?? '').rest.replace(/^CMD\s+/, ''))
const healthchecks = [healthcheckArgv(app.healthcheck), imageHealthcheck]
  .filter((argv): argv is string[] => argv !== undefined)
  .filter((argv, i, list) => list.findIndex((a) => a.join('\0') === argv.join('\0')) === i)

let runtime = ''
t.before(async () => { runtime = await stageRuntime() })

interface Rehearsal { env: Record<string, string>, token: string, password: string, port: number, dir: string }

// The compose environment with every /run/secrets/… path replaced by a local
// file holding what the secret would hold.
async function rehearsal (t: Test, database: { url?: string }): Promise<Rehearsal> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-rehearsal-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const token = randomBytes(24).toString('base64url')
  const password = `pw-${randomBytes(12).toString('hex')}`
  const env = { ...composeEnv }
  for (const mount of mounts) {
    const variable = Object.keys(env).find((k) => env[k] === mount.path)
    if (variable === undefined) throw new Error(`secret ${mount.name} is mounted but no variable reads it`)
    const content = variable === 'API_TOKENS_FILE'
      ? `# tokens for the rehearsal\n${token}\n`
      : variable === 'DATABASE_PASSWORD_FILE' ? `${password}\n` : undefined
    if (content === undefined) throw new Error(`no rehearsal content for ${variable}`)
    const local = join(dir, mount.name)
    writeFileSync(local, content)
    env[variable] = local
  }
  const port = await freePort()
  env.PORT = String(port)
  // The file's metrics port is fixed; here any free one, so replicas and
  // other test runs on this machine never collide.
  if (env.METRICS_PORT !== undefined) env.METRICS_PORT = '0'
  if (database.url === undefined) {
    delete env.DATABASE_URL
    env.PGLITE_DATA_DIR = join(dir, 'pglite')
  } else {
    env.DATABASE_URL = database.url
  }
  return { env, token, password, port, dir }
}

async function runHealthchecks (t: Test, r: Rehearsal): Promise<number[]> {
  const codes: number[] = []
  for (const argv of healthchecks) {
    const { code } = await spawnProcess(t, argv, runtime, r.env).exited
    codes.push(code ?? -1)
  }
  return codes
}

const post = async (port: number, token: string, body: string) => {
  const res = await fetch(`http://127.0.0.1:${port}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body
  })
  return { status: res.status, body: await res.text(), requestId: res.headers.get('x-request-id') }
}

// Production output: JSON lines on stdout, nothing on stderr, no secret anywhere.
function checkOutput (t: Test, server: ServerProcess, secrets: string[]): Array<Record<string, unknown>> {
  const { lines, other } = jsonLines(server.stdout())
  t.ok(lines.length > 0, 'it logged')
  t.same(other, [], 'every stdout line is JSON')
  t.equal(server.stderr(), '', 'nothing on stderr')
  for (const secret of secrets) {
    t.notOk(`${server.stdout()}${server.stderr()}`.includes(secret), `a secret (${secret.length} chars) is never printed`)
  }
  return lines
}

for (const backend of backends()) {
  t.test(`compose rehearsal on ${backend}: ready, a create, a clean exit on SIGTERM`, async (t) => {
    const testDb = backend === 'postgres' ? await createTestDatabase('postgres') : undefined
    if (testDb !== undefined) t.teardown(() => testDb.drop())
    const r = await rehearsal(t, { ...(testDb?.url === undefined ? {} : { url: testDb.url }) })
    const base = `http://127.0.0.1:${r.port}`

    const server = startBuiltServer(t, runtime, r.env)
    await server.waitFor(`${base}/health/ready`)
    t.equal(healthchecks.length >= 1, true, 'there is a healthcheck to run')
    t.same(await runHealthchecks(t, r), healthchecks.map(() => 0), 'the healthchecks pass while it is ready')

    const created = await post(r.port, r.token, '{"id": 9007199254740993, "name": "Rehearsal", "tag": "compose"}')
    t.same({ status: created.status, body: created.body }, { status: 200, body: '{"name":"Rehearsal","tag":"compose"}' }, 'a create answers 200')
    t.ok(created.requestId, 'with a request id')
    const prefix = r.token.slice(0, -1)
    t.equal((await post(r.port, prefix, '{"id": 2, "name": "x"}')).status, 401, 'a prefix of the token is refused')

    const exit = await server.stop('SIGTERM')
    t.same(exit, { code: 0, signal: null }, 'SIGTERM: exit code 0')
    t.same(await runHealthchecks(t, r), healthchecks.map(() => 1), 'the healthchecks fail once it is gone')

    const lines = checkOutput(t, server, [r.token, prefix, r.password])
    t.ok(lines.some((l) => l.msg === 'shutting down: finishing in-flight requests' && l.signal === 'SIGTERM'), 'it logged the drain')
    t.equal(lines.at(-1)?.msg, 'stopped', 'the last line says it stopped')
    t.ok(lines.some((l) => l.reqId === created.requestId), 'the create was logged under its request id')

    t.same(await storedPlants(testDb?.url, r.env.PGLITE_DATA_DIR), [{ id: '9007199254740993', name: 'Rehearsal', tag: 'compose' }], 'the plant is stored, id exact')
  })
}

t.test('under NODE_ENV=production a missing or empty secret stops start-up with one line', async (t) => {
  const r = await rehearsal(t, {})
  // A closed local port: start-up must fail before any connection, and were
  // it not to, nothing leaves this machine.
  const base: Record<string, string> = { ...r.env, DATABASE_URL: 'postgres://plants@127.0.0.1:1/plants' }
  delete base.PGLITE_DATA_DIR
  const withoutTokens = { ...base }
  delete withoutTokens.API_TOKENS_FILE
  const cases: Array<[string, Record<string, string>, RegExp]> = [
    ['no API_TOKENS_FILE', withoutTokens, /^plant-store: API_TOKENS: /],
    ['the committed example copied as is', { ...base, API_TOKENS_FILE: join(root, 'secrets/api_tokens.example.txt') }, /^plant-store: API_TOKENS_FILE: .* holds no token/],
    ['a secret that was not mounted', { ...base, API_TOKENS_FILE: composeEnv.API_TOKENS_FILE as string }, /^plant-store: API_TOKENS_FILE: cannot read/],
    ['no database password file', { ...base, DATABASE_PASSWORD_FILE: join(r.dir, 'missing') }, /^plant-store: DATABASE_PASSWORD_FILE: cannot read/]
  ]
  for (const [label, env, pattern] of cases) {
    t.equal(env.NODE_ENV, 'production')
    const proc = startBuiltServer(t, runtime, env)
    const exit = await Promise.race([proc.exited, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 15_000))])
    if (exit === 'hung') proc.signal('SIGKILL')
    t.not(exit === 'hung' ? 0 : exit.code, 0, `${label}: exits non-zero`)
    const lines = proc.stderr().trimEnd().split('\n')
    t.equal(lines.length, 1, `${label}: one line`)
    t.match(lines[0], pattern, `${label}: names the variable`)
    t.equal(proc.stdout(), '', `${label}: nothing on stdout`)
    t.notOk(proc.stderr().includes(r.password), `${label}: no password printed`)
  }
})

t.test('--scale app=3: three instances start together and migrate once', { skip: needsPostgres }, async (t) => {
  const testDb = await createTestDatabase('postgres' satisfies BackendName)
  t.teardown(() => testDb.drop())
  const replicas = await Promise.all([0, 1, 2].map(async () => await rehearsal(t, { url: testDb.url as string })))
  const servers = replicas.map((r) => startBuiltServer(t, runtime, r.env))
  await Promise.all(servers.map(async (s, i) => { await s.waitFor(`http://127.0.0.1:${(replicas[i] as Rehearsal).port}/health/ready`) }))

  for (const [i, r] of replicas.entries()) {
    t.equal((await post(r.port, r.token, `{"id": ${i + 1}, "name": "replica"}`)).status, 200, `replica ${i}: a create`)
  }
  // Same plant through another replica: a replay, not a duplicate.
  t.equal((await post((replicas[2] as Rehearsal).port, (replicas[2] as Rehearsal).token, '{"id": 1, "name": "replica"}')).status, 200)

  const exits = await Promise.all(servers.map((s) => s.stop('SIGTERM')))
  t.same(exits, servers.map(() => ({ code: 0, signal: null })), 'all exit 0 on SIGTERM')
  const logs = servers.flatMap((s) => jsonLines(s.stdout()).lines)
  t.equal(logs.filter((l) => l.msg === 'migrations applied').length, 1, 'one instance applied the migrations')
  t.equal(logs.filter((l) => l.msg === 'schema up to date').length, 2, 'the others found nothing to do')
  const versions = await withClient(testDb.url as string, (c) => c.query<{ version: string }>('SELECT version::text AS version FROM schemaversion WHERE version > 0'))
  t.same(versions.rows, [{ version: '1' }], 'one row per migration')
  const count = await withClient(testDb.url as string, (c) => c.query<{ n: string }>('SELECT count(*)::text AS n FROM plants'))
  t.equal(count.rows[0]?.n, '3')
})

t.test('the db healthcheck command works as pg_isready on a PostgreSQL server', { skip: needsPostgres }, async (t) => {
  const argv = healthcheckArgv(service(compose, 'db').healthcheck) as string[]
  t.equal(argv[0], 'pg_isready')
  // Only host and port are checked by pg_isready; point them at the local server.
  const at = (flag: string, value: string): string[] => argv.map((a, i) => argv[i - 1] === flag ? value : a)
  const local = new URL(process.env.TEST_DATABASE_URL as string)
  const ready = spawnProcess(t, at('-p', local.port === '' ? '5432' : local.port), root, {})
  t.equal((await ready.exited).code, 0, `${argv.join(' ')}: ready`)
  const closed = spawnProcess(t, at('-p', String(await freePort())), root, {})
  t.not((await closed.exited).code, 0, 'nothing listening: not ready')
})
