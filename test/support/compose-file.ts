import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('../..', import.meta.url))

// docker-compose.yml as the tests read it: the parsed document, loosely
// typed, with helpers that normalise the forms the Compose spec allows.
export const composePath = join(root, 'docker-compose.yml')

export interface Healthcheck { test?: string | string[], interval?: string, timeout?: string, retries?: number, start_period?: string }
export interface Service {
  image?: string
  build?: string | { context?: string, dockerfile?: string }
  environment?: Record<string, string | number | boolean | null> | string[]
  secrets?: Array<string | { source: string, target?: string }>
  depends_on?: string[] | Record<string, { condition?: string }>
  ports?: Array<string | number | { target: number, published?: string | number }>
  volumes?: Array<string | { type?: string, source?: string, target?: string }>
  healthcheck?: Healthcheck
  restart?: string
  stop_signal?: string
  stop_grace_period?: string
  container_name?: string
  [key: string]: unknown
}
export interface Compose {
  name?: string
  services: Record<string, Service>
  secrets?: Record<string, { file?: string, environment?: string, external?: boolean }>
  volumes?: Record<string, unknown>
}

export const composeText = (): string => readFileSync(composePath, 'utf8')

export function readCompose (): Compose {
  return parse(composeText()) as Compose
}

export function service (compose: Compose, name: string): Service {
  const s = compose.services[name]
  if (s === undefined) throw new Error(`docker-compose.yml has no service ${name}`)
  return s
}

// `environment` as a map or as a list of KEY=VALUE, every value a string.
export function environmentOf (s: Service): Record<string, string> {
  const env: Record<string, string> = {}
  if (Array.isArray(s.environment)) {
    for (const entry of s.environment) {
      const at = entry.indexOf('=')
      if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1)
    }
  } else {
    for (const [key, value] of Object.entries(s.environment ?? {})) {
      if (value !== null) env[key] = String(value)
    }
  }
  return env
}

// Where each secret the service mounts appears inside its container.
export function secretMounts (s: Service): Array<{ name: string, path: string }> {
  return (s.secrets ?? []).map((entry) => {
    const name = typeof entry === 'string' ? entry : entry.source
    const target = typeof entry === 'string' ? undefined : entry.target
    const path = target === undefined ? `/run/secrets/${name}` : target.startsWith('/') ? target : `/run/secrets/${target}`
    return { name, path }
  })
}

// A healthcheck's test as the argv the engine runs ("CMD", args…), or
// undefined for a shell form.
export function healthcheckArgv (h: Healthcheck | undefined): string[] | undefined {
  const test = h?.test
  if (!Array.isArray(test) || test[0] !== 'CMD') return undefined
  return test.slice(1)
}

// Compose durations such as "1m30s", "20s", "500ms", in milliseconds.
export function durationMs (text: string): number {
  const units: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
  let total = 0
  let rest = text.trim()
  if (!/^(\d+(\.\d+)?(us|ms|s|m|h))+$/.test(rest)) throw new Error(`not a duration: ${text}`)
  while (rest.length > 0) {
    const m = /^(\d+(?:\.\d+)?)(us|ms|s|m|h)/.exec(rest) as RegExpExecArray
    total += Number(m[1]) * (units[m[2] as string] as number)
    rest = rest.slice(m[0].length)
  }
  return total
}
