import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { Ajv } from 'ajv'
import { DCLinter } from 'dclint'
import { composePath, composeText, durationMs, environmentOf, healthcheckArgv, readCompose, root, secretMounts, service } from '../support/compose-file.js'
import { SHUTDOWN_GRACE_MS } from '../../plugins/http-edge/shutdown.js'

// No Docker engine (nor the compose plugin) runs here: the file is checked
// against the Compose Specification's JSON schema as the maintained dclint
// package ships it, linted by dclint, and its wiring read by the checks below.
const compose = readCompose()
const app = service(compose, 'app')
const db = service(compose, 'db')
const env = environmentOf(app)
const dbEnv = environmentOf(db)

const gitIgnored = (path: string): boolean => {
  try {
    execFileSync('git', ['check-ignore', '-q', path], { cwd: root })
    return true
  } catch {
    return false
  }
}

t.test('valid against the Compose Specification schema', async (t) => {
  const schemaPath = join(dirname(createRequire(import.meta.url).resolve('dclint/package.json')), 'schemas', 'compose.schema.json')
  const schema = JSON.parse(readFileSync(schemaPath, 'utf8')) as Record<string, unknown>
  t.equal(schema.title, 'Compose Specification')
  // The file declares draft-07 by an https URL Ajv does not know by that name.
  delete schema.$schema
  const ajv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true })
  const check = ajv.compile(schema)
  t.ok(check(compose), 'docker-compose.yml is valid')
  t.same(check.errors ?? [], [], 'no schema errors')
  t.notOk(check({ services: { app: { imagee: 'node:22' } } }), 'the schema rejects an unknown key')
  t.notOk(check({ services: { app: { depends_on: { db: { condition: 'whenever' } } } } }), 'the schema rejects an unknown condition')
})

t.test('dclint reports no error', async (t) => {
  const [result] = new DCLinter({ rules: {}, quiet: true, debug: false, exclude: [] }).lintFiles([composePath], false)
  t.same(result?.messages.map((m: { line: number, rule: string, message: string }) => `${m.line}: ${m.rule}: ${m.message}`), [], 'no errors or warnings')
})

t.test('PostgreSQL: official image pinned by major, named volume, pg_isready healthcheck', async (t) => {
  t.match(db.image, /^postgres:\d+(-[a-z0-9]+)?$/, 'official postgres image with a major tag')
  const volume = (db.volumes ?? []).map((v) => typeof v === 'string' ? v.split(':') : [v.source, v.target])
    .find(([, target]) => target === '/var/lib/postgresql/data')
  t.ok(volume, 'the data directory is a volume')
  t.ok(compose.volumes !== undefined && (volume?.[0] as string) in compose.volumes, 'a named volume, declared at the top level')
  const test = healthcheckArgv(db.healthcheck)
  t.equal(test?.[0], 'pg_isready', 'pg_isready decides health')
  t.ok(test?.includes('127.0.0.1'), 'over TCP, so the init-time socket-only server is not taken as ready')
  t.equal(test?.[test.indexOf('-U') + 1], dbEnv.POSTGRES_USER, 'as the configured user')
  t.equal(test?.[test.indexOf('-d') + 1], dbEnv.POSTGRES_DB, 'on the configured database')
  t.ok(db.restart, 'a restart policy')
})

t.test('the app: built here, started once the database is healthy, production settings', async (t) => {
  const build = typeof app.build === 'string' ? { context: app.build } : app.build
  t.equal(build?.context, '.', 'built from this directory')
  t.ok(existsSync(join(root, build?.dockerfile ?? 'Dockerfile')), 'from the Dockerfile')
  t.same(app.depends_on, { db: { condition: 'service_healthy' } }, 'depends_on db: service_healthy')
  t.equal(env.NODE_ENV, 'production')
  t.equal(env.HOST, '0.0.0.0')
  t.equal(app.container_name, undefined, 'no container_name, so --scale app=3 works')

  const url = new URL(env.DATABASE_URL ?? '')
  t.equal(url.protocol, 'postgres:')
  t.equal(url.hostname, 'db', 'DATABASE_URL names the db service')
  t.equal(url.port, '5432')
  t.equal(url.pathname, `/${dbEnv.POSTGRES_DB}`, 'the database the db service creates')
  t.equal(url.username, dbEnv.POSTGRES_USER, 'the user the db service creates')
  t.equal(url.password, '', 'no password in the URL')

  const port = env.PORT ?? '3000'
  const published = (app.ports ?? []).map(String).find((p) => p.endsWith(`:${port}`))
  t.ok(published, `container port ${port} is published`)
  t.match(published, /^(\d+\.\d+\.\d+\.\d+:)?\d+:\d+$/, 'one host port : container port (a range lets a restart move the port)')
  t.equal((app.ports ?? []).length, 1, 'published once')

  t.same(healthcheckArgv(app.healthcheck), ['node', 'dist/src/bin/healthcheck.js', 'ready'], 'healthcheck: node asks /health/ready, what depends_on waits for')
  t.ok(['always', 'unless-stopped', 'on-failure'].includes(app.restart ?? ''), `restart: ${app.restart ?? '(none)'}`)
  t.ok(app.stop_signal === undefined || app.stop_signal === 'SIGTERM', 'stopped with SIGTERM')
  t.ok(durationMs(app.stop_grace_period ?? '10s') > SHUTDOWN_GRACE_MS,
    `stop_grace_period ${app.stop_grace_period ?? '10s (default)'} outlasts the ${SHUTDOWN_GRACE_MS} ms drain`)
})

t.test('secrets: tokens and the database password come from git-ignored files', async (t) => {
  const appSecrets = new Map(secretMounts(app).map((s) => [s.name, s.path]))
  const tokensAt = env.API_TOKENS_FILE
  const tokensSecret = [...appSecrets].find(([, path]) => path === tokensAt)?.[0]
  t.ok(tokensSecret, `API_TOKENS_FILE (${tokensAt ?? 'unset'}) is where a secret is mounted`)
  t.equal(env.API_TOKENS, undefined, 'no API_TOKENS in the environment')

  const passwordSecret = secretMounts(db).find((s) => s.path === dbEnv.POSTGRES_PASSWORD_FILE)?.name
  t.ok(passwordSecret, 'the db reads its password from a secret')
  t.equal(appSecrets.get(passwordSecret as string), env.DATABASE_PASSWORD_FILE, 'the app reads the same secret')

  for (const name of [tokensSecret, passwordSecret] as string[]) {
    const file = compose.secrets?.[name]?.file
    t.match(file, /^\.\/secrets\/[\w.-]+$/, `secret ${name} is a file under secrets/`)
    t.ok(gitIgnored(file as string), `${file as string} is git-ignored`)
  }
  const example = (compose.secrets?.[tokensSecret as string]?.file as string).replace(/\.txt$/, '.example.txt')
  t.ok(existsSync(join(root, example)), `${example} shows the format`)
  t.notOk(gitIgnored(example), `${example} is committed`)
})

t.test('no secret in plain text', async (t) => {
  const all = { ...env, ...dbEnv }
  for (const [key, value] of Object.entries(all)) {
    if (/TOKEN|PASSWORD|SECRET|KEY/i.test(key)) {
      t.ok(key.endsWith('_FILE') && value.startsWith('/run/secrets/'), `${key} points at a mounted secret`)
    }
  }
  for (const [key, value] of Object.entries(all)) {
    if (/^[a-z]+:\/\//.test(value)) t.equal(new URL(value).password, '', `${key}: no password in a URL`)
  }
  const text = composeText()
  t.notMatch(text, /bearer\s+\S/i, 'no bearer token')
  t.notMatch(text, /\bAPI_TOKENS\s*[:=]/, 'no API_TOKENS value')
  t.notMatch(text, /\bPOSTGRES_PASSWORD\s*[:=]/, 'no POSTGRES_PASSWORD value')
  // Whatever secrets a developer keeps locally must not appear in the file.
  for (const file of Object.values(compose.secrets ?? {}).map((s) => s.file).filter((f) => f !== undefined)) {
    const path = join(root, file)
    if (!existsSync(path)) continue
    for (const line of readFileSync(path, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l.length >= 8 && !l.startsWith('#'))) {
      t.notOk(text.includes(line), `a value from ${file} does not appear in docker-compose.yml`)
    }
  }
})

t.test('metrics: METRICS_PORT on the app, on the compose network only, with a scrape example', async (t) => {
  const metricsPort = env.METRICS_PORT
  t.match(metricsPort, /^\d+$/, 'METRICS_PORT is set')
  t.not(metricsPort, env.PORT ?? '3000', 'never the API port')
  t.notOk((app.ports ?? []).map(String).some((p) => p.endsWith(`:${metricsPort ?? ''}`)), 'not published on the host')
  const text = composeText()
  t.match(text, /#\s+scrape_configs:/, 'a commented Prometheus scrape example')
  t.match(text, new RegExp(`#\\s+port: ${metricsPort ?? ''}\\b`), 'scraping the same port')
})
