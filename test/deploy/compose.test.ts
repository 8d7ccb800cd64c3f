import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { Ajv } from 'ajv'
import { DCLinter } from 'dclint'
import { parse } from 'yaml'
import { loadConfig } from '../../src/config.js'
import { root } from '../support/processes.js'
import { composeSettings } from '../../bench/store-cluster.js'

// What running the compose files cannot show, checked on every `npm test`
// (no engine needed): valid against the Compose Specification's JSON schema
// as the maintained dclint package ships it, lint-clean, and nothing secret
// in them. Running them for real is `npm run test:compose`.
const FILES = ['docker-compose.yml', 'docker-compose.scale.yml', 'docker-compose.monitoring.yml', 'test/deploy/compose.build-network.yml']

interface Service {
  command?: string[]
  environment?: Record<string, string | number | null>
  secrets?: string[]
  ports?: string[]
}
interface Compose { services: Record<string, Service>, secrets?: Record<string, { file?: string }> }

const text = (file: string): string => readFileSync(join(root, file), 'utf8')
// `!reset` (compose's override tag) is read as the value it carries.
const read = (file: string): Compose => parse(text(file), { logLevel: 'error' }) as Compose
const compose = read('docker-compose.yml')
const app = compose.services.app as Service
const env = (s: Service | undefined): Record<string, string> =>
  Object.fromEntries(Object.entries(s?.environment ?? {}).filter(([, v]) => v !== null).map(([k, v]) => [k, String(v)]))

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
  const check = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true }).compile(schema)
  for (const file of FILES) {
    t.ok(check(read(file)), `${file} is valid`)
    t.same(check.errors ?? [], [], `${file}: no schema errors`)
  }
  t.notOk(check({ services: { app: { imagee: 'node:22' } } }), 'the schema rejects an unknown key')
})

t.test('dclint reports nothing', async (t) => {
  // An override file adds to docker-compose.yml, which names the project.
  const overrides = { 'require-project-name-field': 0 as const }
  const lint = (file: string, rules = {}): string[] =>
    new DCLinter({ rules, quiet: true, debug: false, exclude: [] }).lintFiles([join(root, file)], false)
      .flatMap((r: { messages: Array<{ line: number, rule: string, message: string }> }) => r.messages.map((m) => `${m.line}: ${m.rule}: ${m.message}`))
  t.same(lint('docker-compose.yml'), [], 'docker-compose.yml: no errors or warnings')
  for (const file of FILES.slice(1)) t.same(lint(file, overrides), [], `${file}: no errors or warnings`)
})

t.test('secrets: tokens and the database password come from git-ignored files', async (t) => {
  for (const [name, secret] of Object.entries(compose.secrets ?? {})) {
    t.match(secret.file, /^\.\/secrets\/[\w.-]+$/, `secret ${name} is a file under secrets/`)
    t.ok(gitIgnored(secret.file as string), `${secret.file as string} is git-ignored`)
  }
  const example = 'secrets/api_tokens.example.txt'
  t.notOk(gitIgnored(example), `${example} is committed`)
  // Copied as it is, it must not start a service with a published token.
  t.throws(() => loadConfig({ API_TOKENS_FILE: join(root, example), NODE_ENV: 'production' }), /holds no token/, `${example} holds no token`)
})

t.test('no secret in plain text', async (t) => {
  for (const [service, s] of Object.entries(compose.services)) {
    for (const [key, value] of Object.entries(env(s))) {
      if (/TOKEN|PASSWORD|SECRET|KEY/i.test(key)) {
        t.ok(key.endsWith('_FILE') && value.startsWith('/run/secrets/'), `${service}: ${key} points at a mounted secret`)
      }
      if (/^[a-z]+:\/\//.test(value)) t.equal(new URL(value).password, '', `${service}: ${key}: no password in a URL`)
    }
  }
  for (const file of FILES) {
    t.notMatch(text(file), /bearer\s+\S/i, `${file}: no bearer token`)
    t.notMatch(text(file), /\b(API_TOKENS|POSTGRES_PASSWORD)\s*[:=]/, `${file}: no API_TOKENS or POSTGRES_PASSWORD value`)
  }
  // Whatever secrets a developer keeps locally must not appear in the files.
  for (const file of Object.values(compose.secrets ?? {}).map((s) => s.file).filter((f) => f !== undefined)) {
    const path = join(root, file)
    if (!existsSync(path)) continue
    for (const line of readFileSync(path, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l.length >= 8 && !l.startsWith('#'))) {
      t.notOk(FILES.some((f) => text(f).includes(line)), `a value from ${file} appears in no compose file`)
    }
  }
})

t.test('metrics: METRICS_PORT on the app, on the compose network only, scraped by the monitoring file', async (t) => {
  const metricsPort = env(app).METRICS_PORT
  t.match(metricsPort, /^\d+$/, 'METRICS_PORT is set')
  t.not(metricsPort, env(app).PORT ?? '3000', 'never the API port')
  t.notOk((app.ports ?? []).some((p) => p.endsWith(`:${metricsPort ?? ''}`)), 'not published on the host')
  t.match(text('docker-compose.yml'), /docker-compose\.monitoring\.yml/, 'docker-compose.yml points at the monitoring file')
  const prometheus = parse(text('deploy/prometheus/prometheus.yml')) as { scrape_configs: Array<{ dns_sd_configs: Array<{ names: string[], type: string, port: number }> }> }
  t.match(prometheus.scrape_configs[0]?.dns_sd_configs[0], { names: ['app'], type: 'A', port: Number(metricsPort) }, 'Prometheus finds every replica by DNS, on METRICS_PORT')
  const published = read('docker-compose.monitoring.yml').services.prometheus?.ports ?? []
  t.equal(published.length, 1, 'Prometheus publishes one port')
  t.match(published[0], /^127\.0\.0\.1:\$\{PROMETHEUS_PORT:-9090\}:9090$/, 'on loopback only')
})

t.test('PostgreSQL runs with the settings for a large store that the bench measures and the docs give', async (t) => {
  const command = compose.services.db?.command ?? []
  t.equal(command[0], 'postgres', 'the image\'s server, its entrypoint kept (it initialises the data directory)')
  const pairs = command.slice(1)
  t.ok(pairs.length > 0 && pairs.every((word, i) => i % 2 === 0 ? word === '-c' : /^\w+=\S+$/.test(word)), 'then -c name=value, and nothing else')
  const settings = composeSettings()
  t.same(settings, pairs.filter((_, i) => i % 2 === 1), 'what the store run (BENCH_STORE) starts its PostgreSQL with')
  for (const name of ['shared_buffers', 'max_wal_size', 'checkpoint_timeout']) t.ok(settings.some((s) => s.startsWith(`${name}=`)), `${name} is set`)
  const capacity = text('docs/operations.md').split(/^## Capacity$/m)[1]?.split(/^## /m)[0] ?? ''
  for (const setting of settings) {
    const [name, value] = setting.split('=') as [string, string]
    t.match(capacity, `${name} = ${value}`, `docs/operations.md, "Capacity", gives ${name} = ${value} to those who run their own server`)
  }
})

interface Rule { alert?: string, for?: string, annotations?: Record<string, string> }
interface RuleTest { alertname: string, exp_alerts: unknown[] }

t.test('alert rules: each says what to do and has promtool tests of firing and of quiet', async (t) => {
  const rules = (parse(text('deploy/prometheus/alerts.yml')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap((g) => g.rules)
  const tests = (parse(text('deploy/prometheus/alerts.test.yml')) as { tests: Array<{ alert_rule_test: RuleTest[] }> }).tests.flatMap((x) => x.alert_rule_test)
  const operations = text('docs/operations.md')
  const headings = [...operations.matchAll(/^#+ (.+)$/gm)].map((m) => `docs/operations.md#${(m[1] as string).toLowerCase().replaceAll(/[^\w\- ]/g, '').replaceAll(' ', '-')}`)
  t.ok(rules.length >= 7, `${rules.length} alerts`)
  for (const { alert, for: wait, annotations } of rules) {
    t.match(wait, /^\d+m$/, `${alert ?? ''}: waits (for)`)
    t.match(annotations, { summary: /\w/, description: /\w/ }, `${alert ?? ''}: a summary and a description`)
    t.ok(headings.includes(annotations?.runbook ?? ''), `${alert ?? ''}: its runbook is a section of docs/operations.md`)
    t.match(operations, `| \`${alert ?? ''}\` |`, `${alert ?? ''}: docs/operations.md says what to do`)
    const mine = tests.filter((x) => x.alertname === alert)
    t.ok(mine.some((x) => x.exp_alerts.length > 0) && mine.some((x) => x.exp_alerts.length === 0), `${alert ?? ''}: tested firing and quiet`)
  }
})
