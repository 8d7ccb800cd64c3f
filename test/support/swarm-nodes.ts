import { execFile, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { docker, type Run } from './docker.js'
import { root } from './processes.js'

// A swarm of several Docker engines on this one machine, for the swarm test:
// the CI machine's swarm-nodes script (SWARM_NODES_SCRIPT overrides its
// path) puts each engine in a network namespace of its own, with its own
// address, and joins them into a swarm (node 1 the manager, the others
// workers). Images come from the main engine (docker-up's), copied in.
// Whatever the test's outcome, `down` removes every node: on the test's
// teardown, and, should the process end before it, on exit or a signal.
const SCRIPT = process.env.SWARM_NODES_SCRIPT ?? join(root, '..', 'shared', 'tools', 'swarm-nodes.sh')

export interface SwarmNode {
  index: number
  // The swarm's name for it (its engine's hostname).
  hostname: string
  // Its own address: nginx's published port answers there.
  address: string
  // Its engine's DOCKER_HOST.
  host: string
}

export interface Swarm { nodes: SwarmNode[] }

// Any command (in cwd, with env added to this process's); never throws for a
// non-zero exit, which callers look at.
export async function command (argv: string[], timeoutMs = 120_000, env: Record<string, string> = {}, cwd = root): Promise<Run> {
  const started = performance.now()
  return await new Promise((resolve) => {
    execFile(argv[0] as string, argv.slice(1), { cwd, env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1
      resolve({ code, stdout, stderr: stderr + (err !== null && typeof err.code !== 'number' ? `\n${err.message}` : ''), ms: performance.now() - started })
    })
  })
}

export async function commandOk (argv: string[], timeoutMs?: number, env?: Record<string, string>): Promise<string> {
  const run = await command(argv, timeoutMs, env)
  if (run.code !== 0) throw new Error(`${argv.join(' ')} exited ${run.code}: ${run.stderr.trim().slice(-2000)}`)
  return run.stdout
}

const script = async (args: string[], timeoutMs = 180_000): Promise<string> => await commandOk(['bash', SCRIPT, ...args], timeoutMs)

// A node's network namespace goes away after `down` returns, once the kernel
// has let go of it; until then its host-side link exists and `up` would fail
// on it ("File exists"). A loaded machine can take minutes to let go.
async function linksGone (timeoutMs = 180_000): Promise<void> {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    if (!/: swv\d+[@:]/.test(await commandOk(['ip', '-o', 'link', 'show']))) return
    await sleep(250)
  }
  throw new Error(`the nodes' links (swv*) still exist ${timeoutMs} ms after down`)
}

let up = false
function downNow (): void {
  if (!up) return
  up = false
  spawnSync('bash', [SCRIPT, 'down'], { stdio: 'inherit', timeout: 120_000 })
}
process.once('exit', downNow)
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    downNow()
    process.exit(1)
  })
}

// n nodes from nothing: whatever an earlier run left (a killed process
// never reaches its teardown) is removed first.
export async function swarmUp (n: number): Promise<Swarm> {
  if (!existsSync(SCRIPT)) throw new Error(`${SCRIPT} is missing: no swarm can start`)
  await script(['down'])
  await linksGone()
  up = true
  await script(['up', String(n)])
  const status = await script(['status'])
  const nodes: SwarmNode[] = []
  for (const m of status.matchAll(/^n(\d+) (\S+) dockerd=\d+ answers$/gm)) {
    const index = Number(m[1])
    const host = /DOCKER_HOST=(\S+)/.exec(await script(['env', String(index)]))?.[1] as string
    nodes.push({ index, hostname: `swn${index}`, address: m[2] as string, host })
  }
  if (nodes.length !== n) throw new Error(`${n} nodes asked for, ${nodes.length} answer:\n${status}`)
  return { nodes }
}

export async function swarmDown (): Promise<void> {
  if (!up) return
  await script(['down'])
  up = false
  await linksGone()
}

export const node = (s: Swarm, index: number): SwarmNode => {
  const found = s.nodes.find((n) => n.index === index)
  if (found === undefined) throw new Error(`no node ${index}`)
  return found
}

// The docker CLI against one node's engine (node 1's manages the swarm).
export async function onNode (n: SwarmNode, args: string[], timeoutMs?: number, cwd?: string): Promise<Run> {
  return await docker(args, timeoutMs, { env: { DOCKER_HOST: n.host }, ...(cwd === undefined ? {} : { cwd }) })
}

export async function onNodeOk (n: SwarmNode, args: string[], timeoutMs?: number): Promise<string> {
  const run = await onNode(n, args, timeoutMs)
  if (run.code !== 0) throw new Error(`docker ${args.join(' ')} on ${n.hostname} exited ${run.code}: ${run.stderr.trim().slice(-2000)}`)
  return run.stdout
}

// Images from the main engine: `everywhere` into every node (the script's
// own `load`), `only` into the one node that runs them.
export async function loadImages (s: Swarm, everywhere: string[], only: { node: SwarmNode, images: string[] }): Promise<void> {
  const main = process.env.DOCKER_HOST ?? ''
  await Promise.all([
    script(['load', ...everywhere], 600_000),
    commandOk(['bash', '-euo', 'pipefail', '-c', `docker save ${only.images.join(' ')} | DOCKER_HOST=${only.node.host} docker load -q`], 600_000, { DOCKER_HOST: main })
  ])
}

// A machine going away: its engine stops (its containers with it).
export const stopNode = async (n: SwarmNode): Promise<void> => { await script(['stop', String(n.index)]) }
export const startNode = async (n: SwarmNode): Promise<void> => { await script(['start', String(n.index)]) }

// A machine cut off without a goodbye: the host's end of its only link goes
// down, so its packets go nowhere and nothing it holds is told.
export const cutOff = async (n: SwarmNode): Promise<void> => { await commandOk(['ip', 'link', 'set', `swv${n.index}`, 'down']) }
export const reconnect = async (n: SwarmNode): Promise<void> => { await commandOk(['ip', 'link', 'set', `swv${n.index}`, 'up']) }

// Until the manager sees the node Ready again (it rejoins by itself).
export async function waitReady (s: Swarm, n: SwarmNode, timeoutMs = 90_000): Promise<number> {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    const run = await onNode(node(s, 1), ['node', 'inspect', '--format', '{{.Status.State}}', n.hostname], 10_000)
    if (run.stdout.trim() === 'ready') return performance.now() - started
    await sleep(500)
  }
  throw new Error(`${n.hostname} not ready again within ${timeoutMs} ms`)
}
