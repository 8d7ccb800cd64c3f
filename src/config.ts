import { readFileSync } from 'node:fs'
import { lookup } from 'node:dns/promises'
import { randomBytes } from 'node:crypto'
import { Type, type Static } from '@sinclair/typebox'
import envSchema from 'env-schema'
import type { Ajv, ErrorObject } from 'ajv'
import { makeWritableDirectory } from './directory.js'

// An enum, so that a wrong word is answered with the words allowed.
function OneOf<const T extends readonly string[]> (words: T, options: { default?: T[number] } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...words], ...options })
}
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const

// What a pattern cannot check. The issuer's keys and discovery over plain HTTP could be forged on the way.
const FORMATS: Record<string, { test: (value: string) => boolean, message: string }> = {
  'secure-url': { test: isSecureUrl, message: 'must be an https URL (plain http only on loopback)' },
  'postgres-url': { test: isPostgresUrl, message: 'must be a URL with a host, postgres://user@host:port/database' }
}

// Every variable a string, converted and checked by env-schema (Ajv with coercion and defaults).
export const Env = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  DATABASE_URL: Type.Optional(Type.String({ format: 'postgres-url' })),
  DATABASE_PASSWORD_FILE: Type.Optional(Type.String({ minLength: 1 })),
  PGLITE_DATA_DIR: Type.String({ minLength: 1, default: './.data/pglite' }),
  API_TOKENS: Type.Optional(Type.String()),
  API_TOKENS_FILE: Type.Optional(Type.String({ minLength: 1 })),
  BODY_LIMIT: Type.Integer({ minimum: 1, maximum: 1073741824, default: 1048576 }),
  LOG_LEVEL: OneOf(LOG_LEVELS, { default: 'info' }),
  DB_TIMEOUT_MS: Type.Integer({ minimum: 1, maximum: 600000, default: 5000 }),
  METRICS_PORT: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
  RATE_LIMIT_PER_MINUTE: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000000000 })),
  AUTH_ISSUER: Type.Optional(Type.String({ format: 'secure-url' })),
  AUTH_AUDIENCE: Type.Optional(Type.String({ minLength: 1 })),
  AUTH_JWKS_URL: Type.Optional(Type.String({ format: 'secure-url' })),
  AUTH_TOKEN_URL: Type.Optional(Type.String({ format: 'secure-url' })),
  AUTH_REQUIRED_SCOPE: Type.String({ pattern: '^[\\x21\\x23-\\x5b\\x5d-\\x7e]+$', default: 'plants:write' }),
  AUTH_CLOCK_SKEW_S: Type.Integer({ minimum: 0, maximum: 600, default: 30 }),
  AUTH_MAX_CLIENTS: Type.Integer({ minimum: 1, maximum: 1000000, default: 1000 }),
  // OpenTelemetry's, read by the exporter: checked so that a typo stops start-up, not silently exports nothing.
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  OTEL_EXPORTER_OTLP_PROTOCOL: Type.Optional(OneOf(OTLP_PROTOCOLS)),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: Type.Optional(OneOf(OTLP_PROTOCOLS)),
  OTEL_SDK_DISABLED: Type.Optional(Type.String()),
  OTEL_TRACES_EXPORTER: Type.Optional(Type.String()),
  NODE_ENV: Type.Optional(Type.String())
}, {
  dependencies: { AUTH_ISSUER: ['AUTH_AUDIENCE'], AUTH_AUDIENCE: ['AUTH_ISSUER'] }
})
export type Env = Static<typeof Env>

// Built from the checked Env, or by hand in tests: a type only.
export interface Config {
  port: number
  host: string
  database: { kind: 'postgres', url: string } | { kind: 'pglite', dataDir: string }
  apiTokens: string[]
  tokenNames?: ReadonlyMap<string, string> // by token, from API_TOKENS_FILE's `NAME TOKEN` lines
  auth?: JwtAuthConfig // unset: static tokens only
  bodyLimit: number
  logLevel: Env['LOG_LEVEL']
  dbTimeoutMs: number
  production: boolean
  metricsPort?: number
  rateLimitPerMinute?: number
  tracing?: { protocol: typeof OTLP_PROTOCOLS[number] }
}

export interface JwtAuthConfig {
  issuer: string
  audience: string
  jwksUrl?: string // unset: discovery's jwks_uri
  tokenUrl?: string // the document's client-credentials flow; unset: discovery's token_endpoint
  requiredScope: string
  clockSkewS: number
  maxClients: number // JWT callers the rate limit and the metrics keep apart
  // Tests shorten these.
  jwksCooldownMs?: number
  fetchTimeoutMs?: number
}

export class ConfigError extends Error {}

// The first wrong variable stops start-up.
export function readEnv (env: NodeJS.ProcessEnv = process.env): Env {
  const raw: Record<string, string> = {}
  for (const [key, schema] of Object.entries(Env.properties)) {
    const value = env[key]
    if (value === undefined || value === '') continue
    // Ajv's coercion takes " 3000", "1e3" and "0x10" as numbers.
    if ((schema as { type?: string }).type === 'integer' && !/^-?\d+$/.test(value)) {
      throw new ConfigError(`${key}: must be a whole number (got ${JSON.stringify(value)})`)
    }
    raw[key] = value
  }
  const formats = (ajv: Ajv): Ajv => Object.entries(FORMATS).reduce((a, [name, { test }]) => a.addFormat(name, test), ajv)
  try {
    // A copy: env-schema writes additionalProperties into the schema it is given.
    return envSchema<Env>({ schema: structuredClone(Env), data: raw, env: false, ajv: { customOptions: formats } })
  } catch (err) {
    const first = (err as { errors?: ErrorObject[] }).errors?.[0]
    if (first === undefined) throw err
    throw new ConfigError(errorLine(first, raw))
  }
}

function errorLine (error: ErrorObject, raw: Record<string, string>): string {
  const p = error.params as { allowedValues?: string[], format?: string, missingProperty?: string, property?: string }
  if (error.keyword === 'dependencies') return `${p.missingProperty}: required with ${p.property}`
  const name = error.instancePath.slice(1)
  const rule = error.keyword === 'format' ? FORMATS[p.format ?? '']?.message : error.message
  const allowed = p.allowedValues === undefined ? '' : `: ${p.allowedValues.join(', ')}`
  return `${name}: ${rule ?? 'not valid'}${allowed} (got ${JSON.stringify(raw[name] ?? null)})`
}

export function databaseConfig (e: Env): Config['database'] {
  if (e.DATABASE_URL === undefined) return { kind: 'pglite', dataDir: e.PGLITE_DATA_DIR }
  const url = e.DATABASE_PASSWORD_FILE === undefined ? e.DATABASE_URL : withPasswordFile(e.DATABASE_URL, e.DATABASE_PASSWORD_FILE)
  return { kind: 'postgres', url }
}

// generatedToken: when none is configured outside production; the server prints it.
export function loadConfig (env: NodeJS.ProcessEnv = process.env): { config: Config, generatedToken: string | undefined } {
  const e = readEnv(env)
  const production = e.NODE_ENV === 'production'
  const fileTokens = readTokenFile(e.API_TOKENS_FILE)
  const envTokens = (e.API_TOKENS ?? '').split(/[,\n]/).map((t) => t.trim()).filter((t) => t.length > 0)
  const apiTokens = [...envTokens, ...fileTokens.map(({ token }) => token)]
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
  const config: Config = {
    port: e.PORT,
    host: e.HOST,
    database: databaseConfig(e),
    apiTokens,
    ...(tokenNames.size === 0 ? {} : { tokenNames }),
    auth: jwtAuthConfig(e),
    bodyLimit: e.BODY_LIMIT,
    logLevel: e.LOG_LEVEL,
    dbTimeoutMs: e.DB_TIMEOUT_MS,
    production,
    metricsPort: e.METRICS_PORT,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    tracing: tracingConfig(e)
  }
  return { config, generatedToken }
}

// As OpenTelemetry's SDKs decide: an endpoint turns spans on, OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none off.
function tracingConfig (e: Env): Config['tracing'] {
  if (e.OTEL_EXPORTER_OTLP_ENDPOINT === undefined && e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT === undefined) return undefined
  if (e.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined
  const exporters = (e.OTEL_TRACES_EXPORTER ?? 'otlp').split(',').map((x) => x.trim().toLowerCase())
  if (exporters.includes('none')) return undefined
  if (!exporters.includes('otlp')) throw new ConfigError(`OTEL_TRACES_EXPORTER: only otlp (or none) is supported (got ${JSON.stringify(e.OTEL_TRACES_EXPORTER)})`)
  return { protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf' }
}

function reason (err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err))
}

// Before the database is opened: else a HOST that does not resolve stops start-up only after the migrations.
export async function checkHost (host: string): Promise<void> {
  await lookup(host).catch((err: unknown) => {
    throw new ConfigError(`HOST: ${host} does not resolve to an address (${reason(err)})`)
  })
}

export function listenError (variable: 'PORT' | 'METRICS_PORT', host: string, port: number, err: unknown): ConfigError {
  const code = reason(err)
  if (code === 'EADDRNOTAVAIL') return new ConfigError(`HOST: ${host} is not an address of this machine (${code})`)
  if (code === 'EADDRINUSE') return new ConfigError(`${variable}: ${port} is already in use on ${host} (${code})`)
  return new ConfigError(`${variable}: cannot listen on ${host}:${port} (${code})`)
}

// Before PGlite opens it, so that a path it cannot use stops start-up naming the variable.
export function preparePgliteDataDir (database: Config['database']): void {
  if (database.kind !== 'pglite' || database.dataDir.startsWith('memory://')) return
  try {
    makeWritableDirectory(database.dataDir)
  } catch (err) {
    throw new ConfigError(`PGLITE_DATA_DIR: cannot use ${database.dataDir} as the database directory (${reason(err)})`)
  }
}

function jwtAuthConfig (e: Env): JwtAuthConfig | undefined {
  if (e.AUTH_ISSUER === undefined) return undefined
  return {
    issuer: e.AUTH_ISSUER,
    audience: e.AUTH_AUDIENCE as string, // Env's dependencies make it come with AUTH_ISSUER
    jwksUrl: e.AUTH_JWKS_URL,
    tokenUrl: e.AUTH_TOKEN_URL,
    requiredScope: e.AUTH_REQUIRED_SCOPE,
    clockSkewS: e.AUTH_CLOCK_SKEW_S,
    maxClients: e.AUTH_MAX_CLIENTS
  }
}

// https, or plain http to this machine (development, tests).
export function isSecureUrl (value: string): boolean {
  const url = URL.parse(value)
  if (url?.protocol === 'https:') return true
  return url?.protocol === 'http:' && /^(localhost|\[::1\]|127\.\d+\.\d+\.\d+)$/.test(url.hostname)
}

// A host by name, or by `?host=` (a Unix socket's directory, as pg reads it).
function isPostgresUrl (value: string): boolean {
  const url = URL.parse(value)
  return url !== null && /^postgres(ql)?:$/.test(url.protocol) && !/\s/.test(value) && (url.hostname !== '' || url.searchParams.has('host'))
}

function readSecretFile (variable: string, path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (err) {
    throw new ConfigError(`${variable}: cannot read ${path} (${reason(err)})`)
  }
}

// A bearer token (RFC 6750 b64token) never starts with '#' nor holds a space: `# comment` and `NAME TOKEN` lines.
function readTokenFile (path: string | undefined): Array<{ name?: string, token: string }> {
  if (path === undefined) return []
  const lines = readSecretFile('API_TOKENS_FILE', path).split(/\r?\n/).map((t) => t.trim()).filter((t) => t !== '' && !t.startsWith('#'))
  if (lines.length === 0) throw new ConfigError(`API_TOKENS_FILE: ${path} holds no token`)
  return lines.map((line) => {
    const words = line.split(/[ \t]+/)
    if (words.length === 1) return { token: line }
    if (words.length > 2) throw new ConfigError(`API_TOKENS_FILE: a line of ${path} has ${words.length} words (expected TOKEN or NAME TOKEN)`)
    return { name: words[0] as string, token: words[1] as string }
  })
}

// Read as the postgres image reads POSTGRES_PASSWORD_FILE, so one Docker secret serves both containers.
function withPasswordFile (databaseUrl: string, path: string): string {
  const password = readSecretFile('DATABASE_PASSWORD_FILE', path).replace(/(\r?\n)+$/, '')
  if (password.length === 0) throw new ConfigError(`DATABASE_PASSWORD_FILE: ${path} holds no password`)
  const url = new URL(databaseUrl)
  if (url.password !== '') throw new ConfigError('DATABASE_PASSWORD_FILE: DATABASE_URL already holds a password; give it in one place')
  if (url.username === '') throw new ConfigError('DATABASE_PASSWORD_FILE: DATABASE_URL names no user for the password')
  url.password = encodeURIComponent(password)
  return url.toString()
}
