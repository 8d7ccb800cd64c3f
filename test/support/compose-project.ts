import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { stripVTControlCharacters } from 'node:util'
import { request } from './http.js'
import { jsonLines, root } from './processes.js'
import { loadOutcome, type Answer, type LoadOutcome } from './create-load.js'
import { docker, dockerOk, type Run } from './docker.js'

// A compose project of the compose test: a fresh copy of the checkout, run
// with `docker compose` as a user runs it. The project name, the files and
// the published port come from compose's own variables (COMPOSE_PROJECT_NAME,
// COMPOSE_FILE, and PLANT_STORE_PORT, which docker-compose.yml reads), so the
// README's commands run as written.

export const PROJECT_PREFIX = 'plant-store-test-compose-'
// The CI engine's containers reach no outside network; the build needs the registry.
export const BUILD_NETWORK = 'test/deploy/compose.build-network.yml'

// prometheusPort: PROMETHEUS_PORT, which docker-compose.monitoring.yml reads.
export interface Project { name: string, dir: string, port: number, files: string[], prometheusPort?: number }

export const projectEnv = (p: Project): Record<string, string> => ({
  COMPOSE_PROJECT_NAME: p.name,
  COMPOSE_FILE: p.files.join(':'),
  PLANT_STORE_PORT: String(p.port),
  ...(p.prometheusPort === undefined ? {} : { PROMETHEUS_PORT: String(p.prometheusPort) })
})

export async function compose (p: Project, args: string[], timeoutMs = 120_000): Promise<Run> {
  return await docker(['compose', '--ansi', 'never', ...args], timeoutMs, { cwd: p.dir, env: projectEnv(p) })
}

// Compose 2.26 starts each line of `logs` with an erase-line escape, even
// with --ansi never: removed, so the lines are the app's own.
export async function composeOk (p: Project, args: string[], timeoutMs?: number): Promise<string> {
  const run = await compose(p, args, timeoutMs)
  if (run.code !== 0) throw new Error(`docker compose ${args.join(' ')} exited ${run.code}: ${run.stderr.trim()}`)
  return stripVTControlCharacters(run.stdout)
}

// A shell script run in the project's directory with the project's variables;
// onStdout sees its output as it comes.
export async function shell (p: Project, script: string, timeoutMs = 600_000, onStdout?: (chunk: string) => void): Promise<Run> {
  const started = performance.now()
  return await new Promise((resolve) => {
    const child = execFile('bash', ['-euo', 'pipefail', '-c', script], { cwd: p.dir, env: { ...process.env, ...projectEnv(p) }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr, ms: performance.now() - started })
    })
    if (onStdout !== undefined) child.stdout?.on('data', (chunk: Buffer | string) => onStdout(chunk.toString()))
  })
}

export interface Container {
  ID: string
  Name: string
  Service: string
  State: string
  Health: string
  ExitCode: number
  Publishers: Array<{ URL: string, PublishedPort: number }> | null
}

// `docker compose ps` prints one JSON object a line (an array in some releases).
export async function containers (p: Project): Promise<Container[]> {
  const out = (await composeOk(p, ['ps', '-a', '--format', 'json'])).trim()
  if (out === '') return []
  return out.startsWith('[') ? JSON.parse(out) as Container[] : out.split('\n').map((l) => JSON.parse(l) as Container)
}

// The ids of a service's running containers.
export async function runningIds (p: Project, service: string): Promise<string[]> {
  return (await composeOk(p, ['ps', '-q', service])).split('\n').filter((l) => l !== '')
}

// Until `count` containers of each service run, and those with a healthcheck are healthy.
export async function waitHealthy (p: Project, count: Record<string, number>, timeoutMs = 180_000): Promise<number> {
  const started = performance.now()
  let seen: Container[] = []
  while (performance.now() - started < timeoutMs) {
    seen = await containers(p)
    const ok = Object.entries(count).every(([service, n]) =>
      seen.filter((c) => c.Service === service && c.State === 'running' && (c.Health === '' || c.Health === 'healthy')).length === n)
    if (ok) return performance.now() - started
    const exited = seen.filter((c) => c.State === 'exited')
    if (exited.length > 0) throw new Error(`exited before healthy: ${exited.map((c) => `${c.Name} (${c.ExitCode})`).join(', ')}\n${(await compose(p, ['logs', '--no-color'])).stdout.slice(-4000)}`)
    await sleep(500)
  }
  throw new Error(`not healthy within ${timeoutMs} ms: ${JSON.stringify(seen.map((c) => [c.Name, c.State, c.Health]))}`)
}

// The project's containers, volumes and networks, as the engine labels them.
async function labelled (name: string): Promise<{ containers: string[], volumes: string[], networks: string[] }> {
  const label = `label=com.docker.compose.project=${name}`
  const list = async (args: string[], field: string): Promise<string[]> =>
    (await dockerOk([...args, '--filter', label, '--format', `{{.${field}}}`])).split('\n').filter((l) => l !== '')
  const [containers, volumes, networks] = await Promise.all([list(['ps', '-a'], 'Names'), list(['volume', 'ls'], 'Name'), list(['network', 'ls'], 'Name')])
  return { containers, volumes, networks }
}

export async function leftovers (name: string): Promise<string[]> {
  const l = await labelled(name)
  return [...l.containers.map((c) => `container ${c}`), ...l.volumes.map((v) => `volume ${v}`), ...l.networks.map((n) => `network ${n}`)]
}

// Everything of the project, the images it built too (compose labels them:
// a rollout leaves the replaced one untagged), by the engine's labels (no
// compose file needed, so it also clears what a killed run left).
export async function removeProject (name: string): Promise<void> {
  const l = await labelled(name)
  if (l.containers.length > 0) await docker(['rm', '-f', '-v', ...l.containers])
  if (l.volumes.length > 0) await docker(['volume', 'rm', '-f', ...l.volumes])
  if (l.networks.length > 0) await docker(['network', 'rm', ...l.networks])
  const images = (await dockerOk(['image', 'ls', '--filter', `label=com.docker.compose.project=${name}`, '--format', '{{.ID}}'])).split('\n').filter((l) => l !== '')
  if (images.length > 0) await docker(['image', 'rm', ...new Set(images)])
}

export async function removeDeadProjects (): Promise<void> {
  const label = ['--filter', 'label=com.docker.compose.project', '--format', '{{.Label "com.docker.compose.project"}}']
  const out = await Promise.all([['ps', '-a'], ['volume', 'ls'], ['network', 'ls'], ['image', 'ls']].map(async (list) => await dockerOk([...list, ...label])))
  const names = new Set(out.join('\n').split('\n').filter((n) => n.startsWith(PROJECT_PREFIX)))
  for (const name of names) {
    const pid = Number(name.slice(PROJECT_PREFIX.length).split('-')[0])
    let alive = true
    try { process.kill(pid, 0) } catch { alive = false }
    if (!alive) await removeProject(name)
  }
}

export interface AccessLine { reqId: string, status: number, outcome?: string, route: string | null }

// The access lines (one per answered request, `msg: request`) in a log.
export const accessLines = (log: string): AccessLine[] =>
  jsonLines(log).lines.filter((l) => l.msg === 'request') as unknown as AccessLine[]

// The README's compose block, split around its `docker compose up --build -d`.
export function readmeComposeSteps (readme: string): { before: string, up: string, after: string } {
  const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string)
  const block = blocks.find((b) => b.includes('docker compose up --build -d'))
  if (block === undefined) throw new Error('no README block with `docker compose up --build -d`')
  const lines = block.split('\n')
  const at = lines.findIndex((l) => l.trim().startsWith('docker compose up --build -d'))
  return { before: lines.slice(0, at).join('\n'), up: lines[at] as string, after: lines.slice(at + 1).join('\n') }
}

// The images the compose files and the Dockerfile name, for docker-up.
export function imagesNamed (files: string[]): string[] {
  const text = ['Dockerfile', ...files].map((f) => readFileSync(join(root, f), 'utf8')).join('\n')
  return [...new Set([...text.matchAll(/^\s*(?:FROM|image:)\s+(\S+)/gm)].map((m) => m[1] as string))]
}

// psql in the db container, as its user: one value a line.
export async function sql (p: Project, query: string): Promise<string[]> {
  const out = await composeOk(p, ['exec', '-T', 'db', 'psql', '-U', 'plants', '-d', 'plants', '-tAc', query])
  return out.split('\n').filter((l) => l !== '')
}

export interface Client { project: Project, token: string, sent: string[] }

// A create as a user sends it, under a request id of its own (kept in
// client.sent, so the access lines can be matched one to one).
// token null: none sent.
export async function create (c: Client, reqId: string, body: object, token: string | null = c.token): Promise<{ status: number, body: string }> {
  c.sent.push(reqId)
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': reqId }
  if (token !== null) headers.authorization = `Bearer ${token}`
  const answer = await request(`http://127.0.0.1:${c.project.port}/plants`, { method: 'POST', headers, body: JSON.stringify(body), timeoutMs: 60_000 })
  return { status: answer.status, body: answer.body }
}

// What a load's creates came to, by the ids the compose project's table holds.
export async function storedAfterLoad (p: Project, answers: Answer[], tag: string): Promise<LoadOutcome> {
  return loadOutcome(answers, new Set(await sql(p, `SELECT id FROM plants WHERE tag = '${tag}'`)))
}

// What nginx logged about replicas it could not use (each request passed to
// the next), by kind; since: an RFC 3339 time.
export async function proxyPassedOn (p: Project, since?: string): Promise<Record<string, number>> {
  const log = await composeOk(p, ['logs', '--no-color', '--no-log-prefix', ...(since === undefined ? [] : ['--since', since]), 'proxy'])
  const kinds: Record<string, number> = {}
  for (const m of log.matchAll(/\[(?:error|warn)\][^*]*\*\d+ ([^,]*upstream[^,]*)/g)) kinds[m[1] as string] = (kinds[m[1] as string] ?? 0) + 1
  return kinds
}
