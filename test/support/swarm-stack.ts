import { randomBytes } from 'node:crypto'
import { chmodSync, cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { answers, type Run } from './docker.js'
import { jsonLines, root } from './processes.js'
import { command, node, onNode, onNodeOk, type Swarm, type SwarmNode } from './swarm-nodes.js'

// deploy/swarm/stack.yml as an operator deploys it: from a copy of the
// repository's files (README.md, deploy/) with the two secret files beside
// them, run with the README's own command lines against the manager.

export const STACK = 'plant-store'
export const APP = `${STACK}_app`
export const DB = `${STACK}_db`

export interface Stack {
  swarm: Swarm
  // The copy the README's commands run in.
  dir: string
  token: string
  manager: SwarmNode
  // The node whose nginx takes the load, and the one labelled for PostgreSQL.
  entry: SwarmNode
  dbNode: SwarmNode
}

export function stackCopy (dir: string): { token: string } {
  cpSync(join(root, 'README.md'), join(dir, 'README.md'))
  cpSync(join(root, 'deploy'), join(dir, 'deploy'), { recursive: true })
  mkdirSync(join(dir, 'secrets'))
  const token = randomBytes(32).toString('hex')
  writeFileSync(join(dir, 'secrets', 'api_tokens.txt'), `${token}\n`)
  writeFileSync(join(dir, 'secrets', 'db_password.txt'), `${randomBytes(32).toString('hex')}\n`)
  // The service runs as uid 1000 and must read them (the README says so too).
  for (const f of ['api_tokens.txt', 'db_password.txt']) chmodSync(join(dir, 'secrets', f), 0o644)
  return { token }
}

export interface SwarmSteps { label: string, deploy: string, update: string }

// The README's swarm block: the label line, the first deploy, the update.
export function readmeSwarmSteps (readme: string): SwarmSteps {
  const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string)
  const block = blocks.find((b) => b.includes('docker stack deploy'))
  if (block === undefined) throw new Error('no README block with `docker stack deploy`')
  const lines = block.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  const label = lines.find((l) => l.startsWith('docker node update --label-add plant-store.db=true '))
  const deploy = lines.find((l) => l.startsWith('docker stack deploy '))
  const update = lines.find((l) => l.startsWith('PLANT_STORE_IMAGE=') && l.includes(' docker stack deploy '))
  if (label === undefined || deploy === undefined || update === undefined) throw new Error(`the README's swarm block lacks a step:\n${block}`)
  return { label, deploy, update }
}

// One README line, in the copy, against the manager's engine.
export async function runStep (s: Stack, line: string, timeoutMs = 120_000): Promise<Run> {
  return await command(['bash', '-euo', 'pipefail', '-c', line], timeoutMs, { DOCKER_HOST: s.manager.host }, s.dir)
}

export interface Task { node: string, image: string, state: string }

// The app's tasks the swarm wants running, with where and what each runs.
export async function appTasks (s: Stack): Promise<Task[]> {
  const out = await onNodeOk(s.manager, ['service', 'ps', APP, '--filter', 'desired-state=running', '--format', '{{.Node}}\t{{.Image}}\t{{.CurrentState}}'], 30_000)
  return out.split('\n').filter((l) => l !== '').map((l) => {
    const [node, image, current] = l.split('\t') as [string, string, string]
    return { node, image, state: current.split(' ')[0] as string }
  })
}

// How many of the app's tasks run (healthy) on each node.
export function perNode (tasks: Task[]): Record<string, number> {
  const count: Record<string, number> = {}
  for (const t of tasks) if (t.state === 'Running') count[t.node] = (count[t.node] ?? 0) + 1
  return count
}

// Polls until check() is true; the time it took.
export async function timeUntil (what: string, check: () => Promise<boolean>, timeoutMs: number, everyMs = 500): Promise<number> {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    if (await check()) return performance.now() - started
    await sleep(everyMs)
  }
  throw new Error(`not ${what} within ${timeoutMs} ms`)
}

// `replicas` app tasks running (healthy), none on the nodes named in `not`.
export async function replicasRunning (s: Stack, replicas: number, opts: { image?: string, not?: string[] } = {}): Promise<boolean> {
  const tasks = await appTasks(s)
  const ok = tasks.filter((t) => t.state === 'Running' && !(opts.not ?? []).includes(t.node) && (opts.image === undefined || t.image === opts.image))
  return ok.length === replicas && tasks.length === replicas
}

// The answer through a node's nginx, as a caller sees it.
export const servesReady = async (n: SwarmNode): Promise<boolean> => await answers(`http://${n.address}:3000/health/ready`)

export async function dbContainer (s: Stack): Promise<string> {
  const id = (await onNodeOk(s.dbNode, ['ps', '-q', '--filter', `label=com.docker.swarm.service.name=${DB}`], 30_000)).trim()
  if (id === '' || id.includes('\n')) throw new Error(`expected one PostgreSQL container on ${s.dbNode.hostname}, found: ${id}`)
  return id
}

// psql in the database's task, on its node, as its user: one value a line.
export async function sql (s: Stack, query: string): Promise<string[]> {
  const out = await onNodeOk(s.dbNode, ['exec', await dbContainer(s), 'psql', '-U', 'plants', '-d', 'plants', '-tAc', query], 60_000)
  return out.split('\n').filter((l) => l !== '')
}

// The messages every app task has logged, gathered by the manager.
export async function appMessages (s: Stack): Promise<string[]> {
  const run = await onNode(s.manager, ['service', 'logs', '--raw', APP], 60_000)
  return jsonLines(`${run.stdout}\n${run.stderr}`).lines.map((l) => String(l.msg))
}

// The image id every running app container has, node by node.
export async function runningImageIds (s: Stack): Promise<string[]> {
  const ids: string[] = []
  for (const n of s.swarm.nodes) {
    const containers = (await onNodeOk(n, ['ps', '-q', '--filter', `label=com.docker.swarm.service.name=${APP}`], 30_000)).split('\n').filter((l) => l !== '')
    if (containers.length > 0) ids.push(...(await onNodeOk(n, ['inspect', '--format', '{{.Image}}', ...containers], 30_000)).split('\n').filter((l) => l !== ''))
  }
  return ids
}

export const readme = (s: Stack): string => readFileSync(join(s.dir, 'README.md'), 'utf8')
export const manager = (s: Swarm): SwarmNode => node(s, 1)
