import t from 'tap'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { Ajv } from 'ajv'
import { DCLinter } from 'dclint'
import { parse } from 'yaml'
import { loadConfig } from '../../src/config.js'
import { root } from '../support/processes.js'

// What running deploy/swarm/stack.yml cannot show, checked on every
// `npm test` (no engine needed): it cannot drift from docker-compose.yml
// (the same image, command and environment for PostgreSQL, the same app
// environment and secret files), its nginx config's name follows
// deploy/nginx.conf, and the choices the swarm depends on are still there.
// Running it for real is `npm run test:swarm`.
const STACK = 'deploy/swarm/stack.yml'

interface Service {
  image?: string
  command?: unknown
  environment?: Record<string, string | number>
  secrets?: string[]
  volumes?: string[]
  healthcheck?: { test: string[] }
  stop_grace_period?: string
  ports?: Array<{ target: number, published: string, mode: string }>
  deploy?: {
    mode?: string
    replicas?: string
    endpoint_mode?: string
    max_replicas_per_node?: number
    placement?: { constraints?: string[] }
    update_config?: { order?: string, failure_action?: string }
  }
}
interface File {
  services: Record<string, Service>
  secrets: Record<string, { file: string, name?: string }>
  configs?: Record<string, { file: string, name: string }>
}

const text = (file: string): string => readFileSync(join(root, file), 'utf8')
const stack = parse(text(STACK)) as File
const compose = parse(text('docker-compose.yml')) as File
const service = (f: File, name: string): Service => f.services[name] as Service
// A compose variable with its default, as the stack file writes it.
const variable = (name: string, fallback: string): string => `\${${name}:-${fallback}}`
const seconds = (d: string | undefined): number => Number(/^(\d+)s$/.exec(d ?? '')?.[1] ?? NaN)

t.test('PostgreSQL and the app as docker-compose.yml runs them', async (t) => {
  const [db, composeDb] = [service(stack, 'db'), service(compose, 'db')]
  t.equal(db.image, composeDb.image, `the same PostgreSQL image (${String(composeDb.image)})`)
  t.same(db.command, composeDb.command, 'the same command (its -c settings)')
  t.same(db.environment, composeDb.environment, 'the same environment')
  t.same(db.volumes?.map((v) => v.split(':')[1]), composeDb.volumes?.map((v) => v.split(':')[1]), 'its data in a volume at the same path')
  t.same(service(stack, 'app').environment, service(compose, 'app').environment, 'the app\'s environment is compose\'s')
  t.same(service(stack, 'app').secrets, service(compose, 'app').secrets, 'the app reads the same secrets')
  for (const [name, secret] of Object.entries(stack.secrets)) {
    const same = compose.secrets[name]?.file
    t.equal(resolve(root, dirname(STACK), secret.file), resolve(root, same ?? '-'), `secret ${name}: compose's file (${String(same)}), relative to the stack file`)
  }
})

t.test('the nginx config is named after deploy/nginx.conf\'s content', async (t) => {
  const config = stack.configs?.nginx_conf
  t.equal(resolve(root, dirname(STACK), config?.file ?? '-'), join(root, 'deploy', 'nginx.conf'), 'the file compose\'s proxy uses')
  const name = `plant-store_nginx_${createHash('sha256').update(text('deploy/nginx.conf')).digest('hex').slice(0, 12)}`
  t.equal(config?.name, name, `a swarm config cannot change in place: after editing deploy/nginx.conf, name it ${name} in ${STACK}`)
  t.match(stack.secrets.api_tokens?.name, /\$\{PLANT_STORE_TOKENS_VERSION:-1\}$/, 'the tokens secret is renamed to rotate them')
})

t.test('the swarm\'s choices', async (t) => {
  const [app, proxy, db] = [service(stack, 'app'), service(stack, 'proxy'), service(stack, 'db')]
  t.equal(app.image, variable('PLANT_STORE_IMAGE', 'plant-store:latest'), 'the app image from PLANT_STORE_IMAGE')
  t.equal(app.deploy?.replicas, variable('PLANT_STORE_REPLICAS', '3'), 'PLANT_STORE_REPLICAS replicas, 3 by default')
  t.equal(app.deploy?.max_replicas_per_node, undefined, 'no cap per node (it would block a start-first update and a lost node\'s replicas)')
  t.same(app.healthcheck?.test.slice(-1), ['live'], 'liveness, never readiness: the swarm replaces unhealthy tasks')
  t.match(app.deploy?.update_config, { order: 'start-first', failure_action: 'rollback' }, 'updated start-first, rolled back on failure')
  t.ok(seconds(app.stop_grace_period) > 8, `a stop grace (${String(app.stop_grace_period)}) past the service's 8 s hard limit on its drain`)
  for (const [name, s] of Object.entries(stack.services)) t.equal(s.deploy?.endpoint_mode, 'dnsrr', `${name}: DNS round robin (no IPVS needed)`)
  t.equal(proxy.deploy?.mode, 'global', 'nginx on every node')
  t.same(proxy.ports, [{ target: 80, published: variable('PLANT_STORE_PORT', '3000'), protocol: 'tcp', mode: 'host' }], 'publishing PLANT_STORE_PORT in host mode')
  t.same(db.deploy?.placement?.constraints, ['node.labels.plant-store.db == true'], 'PostgreSQL on the labelled node')
  t.equal(db.deploy?.update_config?.order, 'stop-first', 'never two PostgreSQL servers on one data directory')
})

t.test('nginx gives up on a vanished replica in time to pass the request on', async (t) => {
  const conf = text('deploy/nginx.conf')
  const directive = (name: string): number => seconds(new RegExp(`^\\s*${name}\\s+(\\d+s);`, 'm').exec(conf)?.[1])
  const { config } = loadConfig({ API_TOKENS: 'x'.repeat(32) })
  const slowestCreateS = (4 * config.dbTimeoutMs + 1000) / 1000
  t.ok(directive('proxy_read_timeout') > slowestCreateS, `proxy_read_timeout is longer than the slowest create (${slowestCreateS} s)`)
  t.ok(directive('proxy_read_timeout') < directive('proxy_next_upstream_timeout'), 'and shorter than proxy_next_upstream_timeout')
  t.ok(directive('proxy_send_timeout') < directive('proxy_next_upstream_timeout'), 'proxy_send_timeout too')
})

t.test('valid against the Compose Specification schema, and dclint reports nothing', async (t) => {
  const schemaPath = join(dirname(createRequire(import.meta.url).resolve('dclint/package.json')), 'schemas', 'compose.schema.json')
  const schema = JSON.parse(readFileSync(schemaPath, 'utf8')) as Record<string, unknown>
  delete schema.$schema
  const check = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true }).compile(schema)
  t.ok(check(stack), `${STACK} is valid`)
  t.same(check.errors ?? [], [], 'no schema errors')
  // Three rules do not fit a stack file: `docker stack` names the stack on
  // its command line and has no top-level name; the docker CLI that Debian
  // bookworm ships still needs `version`; a host-mode port is published on
  // the node's own addresses, which is the point.
  const rules = { 'require-project-name-field': 0 as const, 'no-version-field': 0 as const, 'no-unbound-port-interfaces': 0 as const }
  const messages = new DCLinter({ rules, quiet: true, debug: false, exclude: [] }).lintFiles([join(root, STACK)], false)
    .flatMap((r: { messages: Array<{ line: number, rule: string, message: string }> }) => r.messages.map((m) => `${m.line}: ${m.rule}: ${m.message}`))
  t.same(messages, [], `${STACK}: no errors or warnings`)
})
