import t from 'tap'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig, ConfigError } from '../../src/config.js'

t.test('defaults match the contract', async (t) => {
  const { config, generatedToken } = loadConfig({ API_TOKENS: 'a' })
  t.same(config, {
    port: 3000,
    host: '127.0.0.1',
    database: { kind: 'pglite', dataDir: './.data/pglite' },
    apiTokens: ['a'],
    bodyLimit: 1048576,
    logLevel: 'info',
    dbTimeoutMs: 5000,
    production: false
  })
  t.equal(generatedToken, undefined)
})

t.test('every variable is read', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-config-'))
  const file = join(dir, 'tokens')
  writeFileSync(file, 'from-file-1\n\nfrom-file-2\r\n')
  const { config } = loadConfig({
    PORT: '8080',
    HOST: '0.0.0.0',
    DATABASE_URL: 'postgres://app@db:5432/plants',
    API_TOKENS: 'one, two,,',
    API_TOKENS_FILE: file,
    BODY_LIMIT: '2048',
    LOG_LEVEL: 'warn',
    DB_TIMEOUT_MS: '1500',
    NODE_ENV: 'production'
  })
  t.same(config, {
    port: 8080,
    host: '0.0.0.0',
    database: { kind: 'postgres', url: 'postgres://app@db:5432/plants' },
    apiTokens: ['one', 'two', 'from-file-1', 'from-file-2'],
    bodyLimit: 2048,
    logLevel: 'warn',
    dbTimeoutMs: 1500,
    production: true
  })
})

t.test('metrics, rate limit and tracing are off unless configured', async (t) => {
  const off = loadConfig({ API_TOKENS: 'a' }).config
  t.equal(off.metricsPort, undefined)
  t.equal(off.rateLimitPerMinute, undefined)
  t.equal(off.tracing, undefined)
  const on = loadConfig({ API_TOKENS: 'a', METRICS_PORT: '9464', RATE_LIMIT_PER_MINUTE: '600', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).config
  t.equal(on.metricsPort, 9464)
  t.equal(on.rateLimitPerMinute, 600)
  t.same(on.tracing, { protocol: 'http/protobuf' }, 'OTLP\'s default encoding')
  t.same(loadConfig({ API_TOKENS: 'a', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }).config.tracing, { protocol: 'http/json' })
  t.equal(loadConfig({ API_TOKENS: 'a', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).config.tracing, undefined, 'OTEL_SDK_DISABLED')
  t.equal(loadConfig({ API_TOKENS: 'a', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).config.tracing, undefined, 'OTEL_TRACES_EXPORTER=none')
})

t.test('PGLITE_DATA_DIR may keep the database in memory', async (t) => {
  t.same(loadConfig({ API_TOKENS: 'a', PGLITE_DATA_DIR: 'memory://' }).config.database, { kind: 'pglite', dataDir: 'memory://' })
})

t.test('without tokens: a generated token outside production, refusal in production', async (t) => {
  const dev = loadConfig({})
  t.type(dev.generatedToken, 'string')
  t.ok((dev.generatedToken ?? '').length >= 32, 'long enough to be unguessable')
  t.same(dev.config.apiTokens, [dev.generatedToken])
  t.not(loadConfig({}).generatedToken, dev.generatedToken, 'random each start')
  t.throws(() => loadConfig({ NODE_ENV: 'production' }), /^API_TOKENS: /)
  t.throws(() => loadConfig({ NODE_ENV: 'production', API_TOKENS: ' , ' }), /^API_TOKENS: /)
})

t.test('a bad value names the variable', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /^PORT: /],
    [{ PORT: '70000' }, /^PORT: /],
    [{ PORT: '3000.5' }, /^PORT: /],
    [{ BODY_LIMIT: '0' }, /^BODY_LIMIT: /],
    [{ BODY_LIMIT: 'lots' }, /^BODY_LIMIT: /],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL: /],
    [{ DATABASE_URL: 'mysql://x' }, /^DATABASE_URL: /],
    [{ DATABASE_URL: 'postgres://' }, /^DATABASE_URL: /],
    [{ DATABASE_URL: 'postgres://exa mple' }, /^DATABASE_URL: /],
    [{ API_TOKENS_FILE: '/nonexistent/tokens' }, /^API_TOKENS_FILE: cannot read/],
    [{ DB_TIMEOUT_MS: '-1' }, /^DB_TIMEOUT_MS: /],
    [{ METRICS_PORT: 'nine' }, /^METRICS_PORT: /],
    [{ METRICS_PORT: '70000' }, /^METRICS_PORT: /],
    [{ METRICS_PORT: '3000' }, /^METRICS_PORT: must differ from PORT/],
    [{ RATE_LIMIT_PER_MINUTE: '0' }, /^RATE_LIMIT_PER_MINUTE: /],
    [{ RATE_LIMIT_PER_MINUTE: '1.5' }, /^RATE_LIMIT_PER_MINUTE: /],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /^OTEL_EXPORTER_OTLP_ENDPOINT: /],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTEL_EXPORTER_OTLP_PROTOCOL: /],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'zipkin' }, /^OTEL_TRACES_EXPORTER: /]
  ]
  for (const [env, pattern] of cases) {
    let caught: unknown
    try { loadConfig({ API_TOKENS: 'a', ...env }) } catch (err) { caught = err }
    t.ok(caught instanceof ConfigError, `${JSON.stringify(env)} stops start-up`)
    t.match((caught as Error).message, pattern)
    t.notMatch((caught as Error).message, /\n/, 'one line')
  }
})

t.test('a token file with no token is refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-config-'))
  const file = join(dir, 'empty')
  writeFileSync(file, '\n\n')
  t.throws(() => loadConfig({ API_TOKENS_FILE: file }), /^API_TOKENS_FILE: .* holds no token/)
})

t.test('API_TOKENS_FILE lines may name their caller: NAME TOKEN', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-config-'))
  const file = join(dir, 'tokens')
  writeFileSync(file, '# billing rotates monthly\nbilling  tok-new\nbilling\ttok-old\nanonymous-token\n')
  const { config } = loadConfig({ API_TOKENS_FILE: file, API_TOKENS: 'from-env' })
  t.same(config.apiTokens, ['from-env', 'tok-new', 'tok-old', 'anonymous-token'])
  t.same([...config.tokenNames ?? []], [['tok-new', 'billing'], ['tok-old', 'billing']])
  writeFileSync(file, 'a b c\n')
  t.throws(() => loadConfig({ API_TOKENS_FILE: file }), /^API_TOKENS_FILE: a line of .* has 3 words \(expected TOKEN or NAME TOKEN\)$/)
})

t.test('JWT access tokens: AUTH_* read and checked', async (t) => {
  t.equal(loadConfig({ API_TOKENS: 'a' }).config.auth, undefined, 'off unless AUTH_ISSUER is set')
  const { config } = loadConfig({ API_TOKENS: 'a', AUTH_ISSUER: 'https://id.example.test/', AUTH_AUDIENCE: 'plant-store' })
  t.same(config.auth, { issuer: 'https://id.example.test/', audience: 'plant-store', requiredScope: 'plants:write', clockSkewS: 30, maxClients: 1000 })
  const all = loadConfig({
    API_TOKENS: 'a',
    AUTH_ISSUER: 'http://127.0.0.1:9000',
    AUTH_AUDIENCE: 'plants',
    AUTH_JWKS_URL: 'http://localhost:9000/jwks',
    AUTH_TOKEN_URL: 'https://id.example.test/token',
    AUTH_REQUIRED_SCOPE: 'plants:create',
    AUTH_CLOCK_SKEW_S: '5',
    AUTH_MAX_CLIENTS: '20'
  }).config.auth
  t.same(all, { issuer: 'http://127.0.0.1:9000', audience: 'plants', jwksUrl: 'http://localhost:9000/jwks', tokenUrl: 'https://id.example.test/token', requiredScope: 'plants:create', clockSkewS: 5, maxClients: 20 }, 'plain http on loopback')
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ AUTH_ISSUER: 'http://id.example.test', AUTH_AUDIENCE: 'p' }, /^AUTH_ISSUER: must be an https URL/],
    [{ AUTH_ISSUER: 'not a url', AUTH_AUDIENCE: 'p' }, /^AUTH_ISSUER: must be an https URL/],
    [{ AUTH_ISSUER: 'https://id.example.test', AUTH_AUDIENCE: 'p', AUTH_JWKS_URL: 'http://id.example.test/jwks' }, /^AUTH_JWKS_URL: must be an https URL/],
    [{ AUTH_ISSUER: 'https://id.example.test' }, /^AUTH_AUDIENCE: required with AUTH_ISSUER/],
    [{ AUTH_AUDIENCE: 'p' }, /^AUTH_ISSUER: required with AUTH_AUDIENCE/],
    [{ AUTH_ISSUER: 'https://id.example.test', AUTH_AUDIENCE: 'p', AUTH_CLOCK_SKEW_S: '-1' }, /^AUTH_CLOCK_SKEW_S: /],
    [{ AUTH_ISSUER: 'https://id.example.test', AUTH_AUDIENCE: 'p', AUTH_REQUIRED_SCOPE: 'a b' }, /^AUTH_REQUIRED_SCOPE: /]
  ]
  for (const [env, message] of cases) t.throws(() => loadConfig({ API_TOKENS: 'a', ...env }), message, JSON.stringify(env))
})
