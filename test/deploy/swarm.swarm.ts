// deploy/swarm/stack.yml on a real swarm of three Docker engines:
// `npm run test:swarm` (not part of `npm test`). The app image is built on
// the main engine (docker-up's, as the image and compose tiers build it), a
// second image made from it stands for a new version, and both are copied
// into the nodes with PostgreSQL's and nginx's images. The stack is deployed
// with the README's own lines, then, under creates sent through one node's
// nginx the whole time: a rolling update to the new image, a worker drained,
// a worker's engine stopped, a worker cut off without a goodbye; and every
// create acknowledged in any of them is read back from PostgreSQL.
//
// Which node is which: node 1 is the manager, and takes both PostgreSQL
// (labelled plant-store.db=true) and the load (its nginx). The disturbed
// node is always a worker holding app replicas, so it is never the manager
// (the swarm would stop scheduling), the database's node (creates would 503,
// which is a different promise, see docs/operations.md) nor the node the
// load enters by (the caller's own connection would go). With two workers,
// each disturbance finds one that holds replicas: a drained worker's
// replicas land on the other, and a lost worker's on the one that has none.
//
// No Docker engine or no swarm is a failure here, not a skip: this tier
// exists to run them. Everything is removed on every exit path: the nodes on
// the teardown (and on exit or a signal, see swarm-nodes.ts), the copy of
// the files with its secrets too.
import t, { type Test } from 'tap'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrationVersions } from '../support/postgres.js'
import { imagesNamed } from '../support/compose-project.js'
import { docker, dockerOk, dockerUp } from '../support/docker.js'
import { loadImages, node, onNodeOk, swarmDown, swarmUp, type Swarm } from '../support/swarm-nodes.js'
import { cutOffNode, drain, engineStopped, readBack, rollingUpdate, type Window } from '../support/swarm-phases.js'
import {
  DB, appMessages, appTasks, perNode, readme, readmeSwarmSteps, replicasRunning, runStep, servesReady, sql, stackCopy, timeUntil, type Stack, type SwarmSteps
} from '../support/swarm-stack.js'

const started = performance.now()
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`
// On the main engine; the nodes know them by the names the stack and the README use.
const V1 = 'plant-store-swarm-test:v1'
const V2 = 'plant-store-swarm-test:v2'
const STACK_FILE = 'deploy/swarm/stack.yml'

async function build (dir: string): Promise<{ v2Id: string }> {
  const v1 = await docker(['build', '--network', 'host', '-t', V1, '.'], 20 * 60_000)
  if (v1.code !== 0) throw new Error(`docker build exited ${v1.code}:\n${v1.stderr.slice(-4000)}`)
  // The new version: the same service under another image id.
  mkdirSync(join(dir, 'v2'))
  writeFileSync(join(dir, 'v2', 'Dockerfile'), `FROM ${V1}\nLABEL org.opencontainers.image.version=swarm-test-v2\n`)
  const v2 = await docker(['build', '-t', V2, join(dir, 'v2')], 5 * 60_000)
  if (v2.code !== 0) throw new Error(`docker build (v2) exited ${v2.code}:\n${v2.stderr.slice(-4000)}`)
  t.comment(`images built on the main engine: ${secs(v1.ms + v2.ms)}`)
  return { v2Id: (await dockerOk(['image', 'inspect', '--format', '{{.Id}}', V2])).trim() }
}

async function nodesWithImages (): Promise<Swarm> {
  const begun = performance.now()
  const swarm = await swarmUp(3)
  const upMs = performance.now() - begun
  const others = imagesNamed([STACK_FILE]).filter((i) => !i.includes('$') && !i.startsWith('node:') && !i.startsWith('postgres:'))
  const postgres = imagesNamed([STACK_FILE]).filter((i) => i.startsWith('postgres:'))
  await loadImages(swarm, [V1, V2, ...others], { node: node(swarm, 1), images: postgres })
  for (const n of swarm.nodes) {
    await onNodeOk(n, ['tag', V1, 'plant-store:latest'])
    await onNodeOk(n, ['tag', V2, 'plant-store:v2'])
  }
  t.comment(`3 nodes up in ${secs(upMs)}, images copied in ${secs(performance.now() - begun - upMs)}`)
  return swarm
}

// The README's label and deploy lines; then ready through every node's nginx.
async function deploy (t: Test, s: Stack, steps: SwarmSteps): Promise<void> {
  const label = await runStep(s, steps.label.replace(/ NODE$/, ` ${s.dbNode.hostname}`))
  t.equal(label.code, 0, `${steps.label} (NODE: ${s.dbNode.hostname})${label.code === 0 ? '' : `\n${label.stderr}`}`)
  const begun = performance.now()
  const up = await runStep(s, steps.deploy)
  t.equal(up.code, 0, `${steps.deploy}${up.code === 0 ? '' : `\n${up.stderr}`}`)
  await timeUntil('deployed and ready', async () => await replicasRunning(s, 3) && await servesReady(s.entry), 180_000)
  const readyMs = performance.now() - begun
  t.pass(`deployed: 3 replicas running and ready through ${s.entry.hostname}'s nginx ${secs(readyMs)} after docker stack deploy began`)
  t.comment(`replicas per node: ${JSON.stringify(perNode(await appTasks(s)))}`)
  const every = await Promise.all(s.swarm.nodes.map(async (n) => await servesReady(n)))
  t.same(every, s.swarm.nodes.map(() => true), 'every node\'s address serves (nginx on each, host-mode port)')
  const db = (await onNodeOk(s.manager, ['service', 'ps', DB, '--filter', 'desired-state=running', '--format', '{{.Node}}'])).trim()
  t.equal(db, s.dbNode.hostname, 'PostgreSQL runs on the labelled node')
}

// However many replicas start, one applies the migrations.
async function migratedOnce (t: Test, s: Stack): Promise<void> {
  let msgs: string[] = []
  const done = (m: string): boolean => m === 'migrations applied' || m === 'schema up to date'
  await timeUntil('each replica migrated or found the schema', async () => (msgs = await appMessages(s)).filter(done).length >= 3, 60_000)
  t.equal(msgs.filter((m) => m === 'migrations applied').length, 1, 'one replica applied the migrations')
  t.equal(msgs.filter((m) => m === 'schema up to date').length, 2, 'the other two found the schema')
  const versions = (await sql(s, 'SELECT version FROM schemaversion WHERE version <> 0 ORDER BY version')).map(Number)
  t.same(versions, migrationVersions(), 'each migration recorded once')
}

async function phases (t: Test, s: Stack, steps: SwarmSteps, v2Id: string): Promise<void> {
  const windows: Window[] = []
  await t.test('deployed as the README says', async (t) => {
    await deploy(t, s, steps)
    await migratedOnce(t, s)
  })
  await t.test('a rolling update to a new image under load', async (t) => { windows.push(await rollingUpdate(t, s, steps.update, v2Id)) })
  await t.test('a worker drained under load', async (t) => { windows.push(await drain(t, s)) })
  await t.test('a worker\'s engine stopped under load', async (t) => { windows.push(await engineStopped(t, s)) })
  await t.test('a worker cut off under load', async (t) => { windows.push(await cutOffNode(t, s)) })
  await t.test('every acknowledged create is in PostgreSQL', async (t) => {
    t.equal(windows.length, 4, 'all four disturbances ran')
    await readBack(t, s, windows)
  })
}

const engine = dockerUp(imagesNamed([STACK_FILE]).filter((i) => !i.includes('$')))
if (!engine.ok) {
  t.fail(`no Docker engine, so no swarm: ${engine.reason}`)
} else {
  const work = mkdtempSync(join(tmpdir(), 'plant-store-swarm-'))
  t.teardown(async () => {
    try {
      await swarmDown()
    } finally {
      rmSync(work, { recursive: true, force: true })
      t.comment(`npm run test:swarm: ${secs(performance.now() - started)} in all`)
    }
  })
  try {
    const dir = join(work, 'plant-store')
    mkdirSync(dir)
    const { token } = stackCopy(dir)
    const { v2Id } = await build(work)
    const swarm = await nodesWithImages()
    const manager = node(swarm, 1)
    const s: Stack = { swarm, dir, token, manager, entry: manager, dbNode: manager }
    await phases(t, s, readmeSwarmSteps(readme(s)), v2Id)
  } catch (err) {
    t.fail(`the swarm could not be set up: ${err instanceof Error ? err.message : String(err)}`)
  }
}
