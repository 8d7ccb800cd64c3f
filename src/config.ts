import { readFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { Type, type Static } from '@sinclair/typebox'
import envSchema from 'env-schema'
import type { ErrorObject } from 'ajv'
import { makeWritableDirectory } from './directory.js'

// A string that is one of a few words, as an enum so that a wrong one is
// answered with the words allowed.
function OneOf<const T extends readonly string[]> (words: T, options: { default?: T[number] } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...words], ...options })
}
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

// The OTLP encodings the service can export spans in (both over HTTP).
const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const

// The environment as it arrives: every variable a string, converted and
// checked by env-schema (Ajv with coercion and defaults) before use.
export const Env = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://[^\\s]+$' })),
  DATABASE_PASSWORD_FILE: Type.Optional(Type.String({ minLength: 1 })),
  PGLITE_DATA_DIR: Type.String({ minLength: 1, default: './.data/pglite' }),
  API_TOKENS: Type.Optional(Type.String()),
  API_TOKENS_FILE: Type.Optional(Type.String({ minLength: 1 })),
  BODY_LIMIT: Type.Integer({ minimum: 1, maximum: 1073741824, default: 1048576 }),
  LOG_LEVEL: OneOf(LOG_LEVELS, { default: 'info' }),
  DB_TIMEOUT_MS: Type.Integer({ minimum: 1, maximum: 600000, default: 5000 }),
  METRICS_PORT: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
  RATE_LIMIT_PER_MINUTE: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000000000 })),
  // JWT access tokens (plugins/auth.ts, src/jwt-verification.ts).
  AUTH_ISSUER: Type.Optional(Type.String({ minLength: 1 })),
  AUTH_AUDIENCE: Type.Optional(Type.String({ minLength: 1 })),
  AUTH_JWKS_URL: Type.Optional(Type.String({ minLength: 1 })),
  AUTH_TOKEN_URL: Type.Optional(Type.String({ minLength: 1 })),
  AUTH_REQUIRED_SCOPE: Type.String({ pattern: '^[\\x21\\x23-\\x5b\\x5d-\\x7e]+$', default: 'plants:write' }),
  AUTH_CLOCK_SKEW_S: Type.Integer({ minimum: 0, maximum: 600, default: 30 }),
  AUTH_MAX_CLIENTS: Type.Integer({ minimum: 1, maximum: 1000000, default: 1000 }),
  // OpenTelemetry's own variables. The exporter reads them itself; they are
  // checked here so a typo stops start-up with one line instead of silently
  // exporting nothing.
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  OTEL_EXPORTER_OTLP_PROTOCOL: Type.Optional(OneOf(OTLP_PROTOCOLS)),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: Type.Optional(OneOf(OTLP_PROTOCOLS)),
  OTEL_SDK_DISABLED: Type.Optional(Type.String()),
  OTEL_TRACES_EXPORTER: Type.Optional(Type.String()),
  NODE_ENV: Type.Optional(Type.String())
})
export type Env = Static<typeof Env>

// The service's settings. loadConfig builds them from the checked Env and
// tests write them by hand, so nothing is left to validate: a type only.
export interface Config {
  port: number
  host: string
  database: { kind: 'postgres', url: string } | { kind: 'pglite', dataDir: string }
  apiTokens: string[]
  // Names of static tokens (API_TOKENS_FILE lines `NAME TOKEN`), by token.
  tokenNames?: ReadonlyMap<string, string>
  // JWT access tokens from an issuer (AUTH_*): unset, static tokens only.
  auth?: JwtAuthConfig
  bodyLimit: number
  logLevel: Env['LOG_LEVEL']
  // Bounds every database wait (connect, query, pool checkout): past it the
  // client gets a 503 instead of hanging.
  dbTimeoutMs: number
  production: boolean
  // Prometheus metrics on a listener of their own (plugins/telemetry/metrics-plugin.ts).
  metricsPort?: number
  // Creates per caller per minute (plugins/rate-limit.ts).
  rateLimitPerMinute?: number
  // Spans exported over OTLP/HTTP in this encoding (plugins/telemetry/tracing-plugin.ts).
  tracing?: { protocol: typeof OTLP_PROTOCOLS[number] }
}

export interface JwtAuthConfig {
  issuer: string
  audience: string
  // Unset: the jwks_uri of the issuer's discovery metadata.
  jwksUrl?: string
  // For the OpenAPI document's client-credentials flow; unset: discovery's token_endpoint.
  tokenUrl?: string
  requiredScope: string
  clockSkewS: number
  // JWT callers the rate limit and the metrics keep apart (beyond the static tokens).
  maxClients: number
  // Tests shorten these; the defaults are in src/jwt-verification.ts.
  jwksCooldownMs?: number
  fetchTimeoutMs?: number
}

export class ConfigError extends Error {}

// Checks the environment against Env; the first wrong variable stops start-up.
export function readEnv (env: NodeJS.ProcessEnv = process.env): Env {
  const raw: Record<string, string> = {}
  for (const [key, schema] of Object.entries(Env.properties)) {
    const value = env[key]
    if (value === undefined || value === '') continue
    // Ajv's coercion takes " 3000", "1e3" and "0x10" as numbers: integers
    // must be written whole, in decimal.
    if ((schema as { type?: string }).type === 'integer' && !/^-?\d+$/.test(value)) {
      throw new ConfigError(`${key}: must be a whole number (got ${JSON.stringify(value)})`)
    }
    raw[key] = value
  }
  let e: Env
  try {
    // A copy: env-schema writes additionalProperties into the schema it is given.
    e = envSchema<Env>({ schema: structuredClone(Env), data: raw, env: false })
  } catch (err) {
    const first = (err as { errors?: ErrorObject[] }).errors?.[0]
    if (first === undefined) throw err
    const name = first.instancePath.replace(/^\//, '')
    const allowed = first.keyword === 'enum' ? `: ${(first.params as { allowedValues: string[] }).allowedValues.join(', ')}` : ''
    throw new ConfigError(`${name}: ${first.message ?? 'not valid'}${allowed} (got ${JSON.stringify(raw[name] ?? null)})`)
  }
  if (e.DATABASE_URL !== undefined) checkDatabaseUrl(e.DATABASE_URL)
  return e
}

export function databaseConfig (e: Env): Config['database'] {
  if (e.DATABASE_URL === undefined) return { kind: 'pglite', dataDir: e.PGLITE_DATA_DIR }
  const url = e.DATABASE_PASSWORD_FILE === undefined
    ? e.DATABASE_URL
    : withPassword(e.DATABASE_URL, readPasswordFile(e.DATABASE_PASSWORD_FILE))
  return { kind: 'postgres', url }
}

// generatedToken is set when no token was configured outside production:
// the server prints it once.
export function loadConfig (env: NodeJS.ProcessEnv = process.env): { config: Config, generatedToken: string | undefined } {
  const e = readEnv(env)
  const production = e.NODE_ENV === 'production'
  const fileTokens = readTokenFile(e.API_TOKENS_FILE)
  const apiTokens = [...splitTokens(e.API_TOKENS ?? ''), ...fileTokens.map(({ token }) => token)]
  const tokenNames = new Map(fileTokens.flatMap(({ name, token }) => name === undefined ? [] : [[token, name] as const]))
  let generatedToken: string | undefined
  if (apiTokens.length === 0) {
    if (production) throw new ConfigError('API_TOKENS: no token configured (set API_TOKENS or API_TOKENS_FILE); refusing to start under NODE_ENV=production')
    generatedToken = randomBytes(24).toString('base64url')
    apiTokens.push(generatedToken)
  }

  if (e.METRICS_PORT !== undefined && e.METRICS_PORT !== 0 && e.METRICS_PORT === e.PORT) {
    throw new ConfigError(`METRICS_PORT: must differ from PORT (${e.PORT}); metrics never share the API port`)
  }
  const tracing = tracingConfig(e)
  const auth = jwtAuthConfig(e)
  const config: Config = {
    port: e.PORT,
    host: e.HOST,
    database: databaseConfig(e),
    apiTokens,
    ...(tokenNames.size === 0 ? {} : { tokenNames }),
    ...(auth === undefined ? {} : { auth }),
    bodyLimit: e.BODY_LIMIT,
    logLevel: e.LOG_LEVEL,
    dbTimeoutMs: e.DB_TIMEOUT_MS,
    production,
    ...(e.METRICS_PORT === undefined ? {} : { metricsPort: e.METRICS_PORT }),
    ...(e.RATE_LIMIT_PER_MINUTE === undefined ? {} : { rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE }),
    ...(tracing === undefined ? {} : { tracing })
  }
  return { config, generatedToken }
}

// Spans are exported when an OTLP endpoint is configured, as OpenTelemetry's
// SDKs decide: OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it
// off. The default encoding is OTLP's, protobuf.
function tracingConfig (e: Env): Config['tracing'] {
  if (e.OTEL_EXPORTER_OTLP_ENDPOINT === undefined && e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT === undefined) return undefined
  if (e.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined
  const exporters = (e.OTEL_TRACES_EXPORTER ?? 'otlp').split(',').map((x) => x.trim().toLowerCase())
  if (exporters.includes('none')) return undefined
  if (!exporters.includes('otlp')) throw new ConfigError(`OTEL_TRACES_EXPORTER: only otlp (or none) is supported (got ${JSON.stringify(e.OTEL_TRACES_EXPORTER)})`)
  return { protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf' }
}

// The embedded database's directory, made (or checked) before PGlite opens
// it, so that a path the service cannot use stops start-up with a line
// naming the variable. Kept out of loadConfig, which creates nothing.
export function preparePgliteDataDir (database: Config['database']): void {
  if (database.kind !== 'pglite' || database.dataDir.startsWith('memory://')) return
  try {
    makeWritableDirectory(database.dataDir)
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message
    throw new ConfigError(`PGLITE_DATA_DIR: cannot use ${database.dataDir} as the database directory (${reason})`)
  }
}

function splitTokens (text: string): string[] {
  return text.split(/[,\n]/).map((t) => t.trim()).filter((t) => t.length > 0)
}

// JWT access tokens need both the issuer and the audience; the issuer's
// URLs are https (keys and discovery over plain HTTP could be forged on the
// way), loopback excepted for development and tests.
function jwtAuthConfig (e: Env): JwtAuthConfig | undefined {
  if (e.AUTH_ISSUER === undefined) {
    if (e.AUTH_AUDIENCE !== undefined) throw new ConfigError('AUTH_ISSUER: required with AUTH_AUDIENCE (the issuer whose tokens to accept)')
    return undefined
  }
  if (e.AUTH_AUDIENCE === undefined) throw new ConfigError('AUTH_AUDIENCE: required with AUTH_ISSUER (the audience this service\'s tokens name)')
  checkIssuerUrl('AUTH_ISSUER', e.AUTH_ISSUER)
  if (e.AUTH_JWKS_URL !== undefined) checkIssuerUrl('AUTH_JWKS_URL', e.AUTH_JWKS_URL)
  if (e.AUTH_TOKEN_URL !== undefined) checkIssuerUrl('AUTH_TOKEN_URL', e.AUTH_TOKEN_URL)
  return {
    issuer: e.AUTH_ISSUER,
    audience: e.AUTH_AUDIENCE,
    ...(e.AUTH_JWKS_URL === undefined ? {} : { jwksUrl: e.AUTH_JWKS_URL }),
    ...(e.AUTH_TOKEN_URL === undefined ? {} : { tokenUrl: e.AUTH_TOKEN_URL }),
    requiredScope: e.AUTH_REQUIRED_SCOPE,
    clockSkewS: e.AUTH_CLOCK_SKEW_S,
    maxClients: e.AUTH_MAX_CLIENTS
  }
}

// https, or plain http to this machine (development, tests).
export function isSecureUrl (value: string): boolean {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return false
  }
  if (url.protocol === 'https:') return true
  const host = url.hostname
  return url.protocol === 'http:' && (host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host))
}

function checkIssuerUrl (name: string, value: string): void {
  if (!isSecureUrl(value)) throw new ConfigError(`${name}: must be an https URL (plain http only on loopback; got ${JSON.stringify(value)})`)
}

interface FileToken { name?: string, token: string }

function readSecretFile (variable: string, path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (err) {
    throw new ConfigError(`${variable}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`)
  }
}

function readTokenFile (path: string | undefined): FileToken[] {
  if (path === undefined) return []
  const text = readSecretFile('API_TOKENS_FILE', path)
  // A bearer token never starts with '#' (RFC 6750 b64token), so such lines
  // can explain the file, as the committed example does.
  // A line may name its caller first, `NAME TOKEN`: a token never holds a
  // space, and the name is what logs, metrics and the rate limit show.
  const lines = text.split(/\r?\n/).map((t) => t.trim()).filter((t) => t.length > 0 && !t.startsWith('#'))
  if (lines.length === 0) throw new ConfigError(`API_TOKENS_FILE: ${path} holds no token`)
  return lines.map((line) => {
    const words = line.split(/[ \t]+/)
    if (words.length === 1) return { token: line }
    if (words.length > 2) throw new ConfigError(`API_TOKENS_FILE: a line of ${path} has ${words.length} words (expected TOKEN or NAME TOKEN)`)
    return { name: words[0] as string, token: words[1] as string }
  })
}

function checkDatabaseUrl (url: string): void {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new ConfigError('DATABASE_URL: not a valid URL (expected postgres://user@host:port/database)')
  }
  if (parsed.hostname === '' && !parsed.searchParams.has('host')) {
    throw new ConfigError('DATABASE_URL: no host (expected postgres://user@host:port/database)')
  }
}

// The database password as a Docker secret: the whole file less trailing
// line breaks, as the postgres image reads POSTGRES_PASSWORD_FILE, so one
// secret file serves both containers and no password sits in the compose file.
function readPasswordFile (path: string): string {
  const password = readSecretFile('DATABASE_PASSWORD_FILE', path).replace(/(\r?\n)+$/, '')
  if (password.length === 0) throw new ConfigError(`DATABASE_PASSWORD_FILE: ${path} holds no password`)
  return password
}

function withPassword (databaseUrl: string, password: string): string {
  const url = new URL(databaseUrl)
  if (url.password !== '') throw new ConfigError('DATABASE_PASSWORD_FILE: DATABASE_URL already holds a password; give it in one place')
  if (url.username === '') throw new ConfigError('DATABASE_PASSWORD_FILE: DATABASE_URL names no user for the password')
  url.password = encodeURIComponent(password)
  return url.toString()
}
