import { execFile, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { root } from './processes.js'

// A Docker engine for the container and compose tests, the way CI and people
// get one:
//   eval "$(../shared/tools/docker-up.sh node:26-bookworm-slim)"
// The script starts dockerd with a bridge network that reaches no outside
// network (so every build that runs npm ci uses the host network) and makes
// the named images exist. Its stdout is `export NAME=value` lines, applied
// here to process.env; its progress goes to stderr.
// The image is the Dockerfile's own base (every stage uses the same one, which
// test/deploy/dockerfile.test.ts checks), so the Node line is pinned only there.
export const BASE_IMAGE = /^FROM\s+(\S+)/m.exec(readFileSync(join(root, 'Dockerfile'), 'utf8'))?.[1] ?? 'no FROM in the Dockerfile'
// DOCKER_UP_SCRIPT replaces it (a machine with its own engine, or to see the
// no-engine path: DOCKER_UP_SCRIPT=/nonexistent).
const DOCKER_UP = process.env.DOCKER_UP_SCRIPT ?? join(root, '..', 'shared', 'tools', 'docker-up.sh')

export type Engine = { ok: true } | { ok: false, reason: string }

export function dockerUp (images: string[] = [BASE_IMAGE]): Engine {
  if (!existsSync(DOCKER_UP)) return { ok: false, reason: `${DOCKER_UP} is missing` }
  const run = spawnSync('bash', [DOCKER_UP, ...images], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 15 * 60_000 })
  process.stderr.write(run.stderr ?? '')
  if (run.status !== 0) {
    const why = (run.stderr ?? '').trim().split('\n').at(-1) ?? ''
    return { ok: false, reason: `docker-up failed (${run.error?.message ?? `exit ${String(run.status)}`}): ${why}` }
  }
  for (const m of (run.stdout ?? '').matchAll(/^export ([A-Z_][A-Z0-9_]*)=(.*)$/gm)) {
    process.env[m[1] as string] = (m[2] as string).replace(/^'(.*)'$/, '$1')
  }
  return { ok: true }
}

export interface Run { code: number, stdout: string, stderr: string, ms: number }

// The docker CLI (in cwd, with env added to this process's); never throws
// for a non-zero exit, which tests look at.
export async function docker (args: string[], timeoutMs = 120_000, opts: { cwd?: string, env?: Record<string, string> } = {}): Promise<Run> {
  const started = performance.now()
  return await new Promise((resolve) => {
    execFile('docker', args, { cwd: opts.cwd ?? root, env: { ...process.env, ...opts.env }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1
      resolve({ code, stdout, stderr: stderr + (err !== null && typeof err.code !== 'number' ? `\n${err.message}` : ''), ms: performance.now() - started })
    })
  })
}

export async function dockerOk (args: string[], timeoutMs?: number): Promise<string> {
  const run = await docker(args, timeoutMs)
  if (run.code !== 0) throw new Error(`docker ${args.join(' ')} exited ${run.code}: ${run.stderr.trim()}`)
  return run.stdout
}

// Everything this run creates carries these labels, so the run's teardown
// removes it and a later run removes what a killed run left behind.
const RUN_LABEL = 'plant-store.test-run'
const PID_LABEL = 'plant-store.test-pid'
export const runId = `${process.pid}-${Date.now().toString(36)}`
export const labels = ['--label', `${RUN_LABEL}=${runId}`, '--label', `${PID_LABEL}=${process.pid}`]

function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function labelled (kind: 'container' | 'volume', filter: string): Promise<Array<{ name: string, pid: number }>> {
  const format = kind === 'container' ? `{{.ID}} {{.Label "${PID_LABEL}"}}` : `{{.Name}} {{.Label "${PID_LABEL}"}}`
  const args = kind === 'container' ? ['ps', '-a', '--filter', `label=${filter}`, '--format', format] : ['volume', 'ls', '--filter', `label=${filter}`, '--format', format]
  const out = await dockerOk(args)
  return out.split('\n').filter((l) => l.trim() !== '').map((l) => {
    const [name, pid] = l.trim().split(/\s+/)
    return { name: name as string, pid: Number(pid) }
  })
}

// Containers first (a volume in use cannot go), then volumes.
async function remove (items: { containers: string[], volumes: string[] }): Promise<void> {
  if (items.containers.length > 0) await docker(['rm', '-f', '-v', ...items.containers])
  if (items.volumes.length > 0) await docker(['volume', 'rm', '-f', ...items.volumes])
}

export async function removeThisRun (): Promise<void> {
  await remove({
    containers: (await labelled('container', `${RUN_LABEL}=${runId}`)).map((c) => c.name),
    volumes: (await labelled('volume', `${RUN_LABEL}=${runId}`)).map((v) => v.name)
  })
}

export async function removeLeftovers (): Promise<void> {
  const dead = (items: Array<{ name: string, pid: number }>): string[] => items.filter((i) => !alive(i.pid)).map((i) => i.name)
  await remove({ containers: dead(await labelled('container', PID_LABEL)), volumes: dead(await labelled('volume', PID_LABEL)) })
}

export async function createVolume (name: string): Promise<string> {
  const full = `plant-store-test-${runId}-${name}`
  await dockerOk(['volume', 'create', ...labels, full])
  return full
}

export interface ContainerOptions {
  env: Record<string, string>
  volumes?: string[]
  // Probe often, so `healthy` shows within seconds of ready.
  fastHealth?: boolean
  argv?: string[]
}

export const HEALTH_FLAGS = ['--health-interval=1s', '--health-timeout=5s', '--health-retries=3', '--health-start-period=60s']

// `docker run` with the host network only (the engine has no bridge).
export function runArgs (image: string, opts: ContainerOptions, extra: string[] = []): string[] {
  return [
    'run', '--network', 'host', ...labels, ...extra,
    ...Object.entries(opts.env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
    ...(opts.volumes ?? []).flatMap((v) => ['-v', v]),
    ...(opts.fastHealth === true ? HEALTH_FLAGS : []),
    image, ...(opts.argv ?? [])
  ]
}

export async function startContainer (image: string, name: string, opts: ContainerOptions): Promise<string> {
  const full = `plant-store-test-${runId}-${name}`
  await dockerOk(runArgs(image, opts, ['-d', '--name', full]))
  return full
}

export interface State { Status: string, Running: boolean, ExitCode: number, OOMKilled: boolean, Health?: { Status: string } }

export async function state (container: string): Promise<State> {
  return JSON.parse(await dockerOk(['inspect', '--format', '{{json .State}}', container])) as State
}

export async function logs (container: string): Promise<{ stdout: string, stderr: string }> {
  const run = await docker(['logs', container])
  return { stdout: run.stdout, stderr: run.stderr }
}

// Polls until check() is true; fails early when the container has stopped.
export async function waitUntil (container: string, what: string, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    if (await check()) return
    const s = await state(container)
    if (!s.Running) {
      const out = await logs(container)
      throw new Error(`${container} stopped (exit ${s.ExitCode}) before ${what}:\n${out.stdout}\n${out.stderr}`)
    }
    await sleep(150)
  }
  throw new Error(`${container}: not ${what} within ${timeoutMs} ms`)
}

export async function answers (url: string, status = 200): Promise<boolean> {
  return await fetch(url, { signal: AbortSignal.timeout(2000) }).then((r) => r.status === status, () => false)
}

export const waitReady = async (container: string, port: number): Promise<void> =>
  await waitUntil(container, 'ready', () => answers(`http://127.0.0.1:${port}/health/ready`))

export const waitHealthy = async (container: string): Promise<void> =>
  await waitUntil(container, 'healthy', async () => (await state(container)).Health?.Status === 'healthy')
