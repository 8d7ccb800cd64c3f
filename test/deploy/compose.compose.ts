// docker compose on a real engine: `npm run test:compose` (not part of
// `npm test`). What a user does with a fresh clone, the README's compose
// steps as written, the alert rules' tests, then three replicas behind the
// proxy of docker-compose.scale.yml with docker-compose.monitoring.yml:
// a rollout under load, and an alert once the database stops. The engine comes from docker-up (see docker.ts);
// without one, this says why and runs nothing.
import t, { type Test } from 'tap'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort, jsonLines, root } from '../support/processes.js'
import { answers, docker, dockerUp } from '../support/docker.js'
import {
  BUILD_NETWORK, PROJECT_PREFIX, accessLines, compose, composeOk, containers, create, imagesNamed, leftovers, readmeComposeSteps,
  removeDeadProjects, removeProject, shell, waitHealthy, type Client, type Project
} from '../support/compose-project.js'
import { scaleTests } from '../support/compose-scale.js'
import { MONITORING_FILE, ruleTests } from '../support/compose-monitoring.js'

const exec = promisify(execFile)
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`
const STOP_GRACE_MS = 20_000

async function waitServing (port: number, timeoutMs = 120_000): Promise<number> {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    if (await answers(`http://127.0.0.1:${port}/health/ready`)) return performance.now() - started
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error(`port ${port}: not ready within ${timeoutMs} ms`)
}

// The README's steps: the secrets, `docker compose up --build -d`, then
// (once healthy) its curl lines against the published port.
async function readmeSteps (t: Test, c: Client): Promise<void> {
  const steps = readmeComposeSteps(readFileSync(join(c.project.dir, 'README.md'), 'utf8'))
  const secrets = await shell(c.project, steps.before)
  t.equal(secrets.code, 0, `the README's secret steps run${secrets.code === 0 ? '' : `: ${secrets.stderr}`}`)
  const tokens = readFileSync(join(c.project.dir, 'secrets', 'api_tokens.txt'), 'utf8').split('\n').filter((l) => l !== '' && !l.startsWith('#'))
  t.equal(tokens.length, 1, 'one token in secrets/api_tokens.txt')
  c.token = tokens[0] as string

  const up = await shell(c.project, steps.up)
  t.equal(up.code, 0, `${steps.up}: ${secs(up.ms)}${up.code === 0 ? '' : `\n${up.stderr.slice(-4000)}`}`)
  t.pass(`both services healthy ${secs(await waitHealthy(c.project, { app: 1, db: 1 }))} later`)

  const tryIt = await shell(c.project, steps.after.replaceAll('localhost:3000', `localhost:${c.project.port}`), 60_000)
  c.sent.push('readme-try-1')
  t.equal(tryIt.code, 0, 'the README\'s curl lines run')
  const ok = tryIt.stdout.match(/HTTP\/1\.1 200 /g)?.length
  t.equal(ok, 2, `ready and the create both answer 200${ok === 2 ? '' : `:\n${tryIt.stdout}`}`)
  t.match(tryIt.stdout, /x-request-id: readme-try-1/i, 'with the request id sent')
  t.match(tryIt.stdout, '{"name":"Monstera","tag":"indoor"}', 'and the plant')
}

async function appExit (p: Project): Promise<number | undefined> {
  return (await containers(p)).find((c) => c.Service === 'app')?.ExitCode
}

function checkAppLog (t: Test, c: Client, log: string): void {
  const lines = accessLines(log)
  const ids = lines.map((l) => l.reqId)
  t.same([...ids].sort(), [...c.sent].sort(), `one access line per request (${ids.length})`)
  t.notOk(log.includes(c.token), 'no token in docker compose logs app')
  t.ok(jsonLines(log).lines.some((l) => l.msg === 'stopped'), 'the app logged that it stopped')
}

async function singleTests (t: Test, c: Client): Promise<void> {
  const p = c.project
  await readmeSteps(t, c)
  const plant = { id: 1, name: 'Monstera', tag: 'indoor' }
  t.equal((await create(c, 'no-token', plant, null)).status, 401, 'no token: 401')
  t.equal((await create(c, 'wrong-token', plant, `${c.token}x`)).status, 401, 'a wrong token: 401')
  t.same(await create(c, 'replay', plant), { status: 200, body: '{"name":"Monstera","tag":"indoor"}' }, 'the same plant again: 200')
  t.equal((await create(c, 'conflict', { id: 1, name: 'Fern' })).status, 409, 'another plant under its id: 409')

  const restart = await compose(p, ['restart', 'app'], 60_000)
  t.equal(restart.code, 0, `docker compose restart app (${secs(restart.ms)})`)
  t.pass(`serving again ${secs(await waitServing(p.port))} later`)
  t.equal((await create(c, 'after-restart', { id: 2, name: 'Pilea' })).status, 200, 'a create after the restart: 200')

  const stop = await compose(p, ['stop'], 60_000)
  t.equal(stop.code, 0, 'docker compose stop')
  t.ok(stop.ms < STOP_GRACE_MS, `inside the ${secs(STOP_GRACE_MS)} grace period (${secs(stop.ms)})`)
  t.equal(await appExit(p), 0, 'the app exited 0')
  checkAppLog(t, c, await composeOk(p, ['logs', '--no-color', '--no-log-prefix', 'app']))

  await composeOk(p, ['down'], 60_000)
  t.same(await leftovers(p.name), [`volume ${p.name}_pgdata`], 'down: only the volume is left')
  await composeOk(p, ['up', '-d'], 180_000)
  t.pass(`up again: healthy ${secs(await waitHealthy(p, { app: 1, db: 1 }))} later`)
  t.equal((await create(c, 'kept', { id: 1, name: 'Fern' })).status, 409, 'the plant is still there: 409 for another under its id')
  t.equal((await create(c, 'kept-replay', plant)).status, 200, 'and 200 for itself')

  const down = await compose(p, ['down', '-v'], 60_000)
  t.equal(down.code, 0, `docker compose down -v (${secs(down.ms)})`)
  t.same(await leftovers(p.name), [], 'down -v: no container, volume or network of the project is left')
}

const started = performance.now()
const engine = dockerUp(imagesNamed(['docker-compose.yml', 'docker-compose.scale.yml', MONITORING_FILE]))
if (!engine.ok) {
  t.comment(`no Docker engine: ${engine.reason}`)
  t.plan(0, `no Docker engine, nothing run: ${engine.reason}`)
} else {
  await removeDeadProjects()
  const work = mkdtempSync(join(tmpdir(), 'plant-store-compose-'))
  const dir = join(work, 'plant-store')
  const name = `${PROJECT_PREFIX}${process.pid}-${Date.now().toString(36)}`
  t.teardown(async () => {
    try {
      await removeProject(name)
    } finally {
      rmSync(work, { recursive: true, force: true })
      t.comment(`npm run test:compose: ${secs(performance.now() - started)} in all`)
    }
  })
  await exec('git', ['clone', '--quiet', root, dir])
  const version = await docker(['compose', 'version', '--short'])
  t.comment(`docker compose ${version.stdout.trim()}, project ${name}`)

  t.test('the README\'s compose steps on a fresh clone', async (t) => {
    const project = { name, dir, port: await freePort(), files: ['docker-compose.yml', BUILD_NETWORK] }
    await singleTests(t, { project, token: '', sent: [] })
  })
  t.test('the alert rules under promtool', async (t) => { await ruleTests(t, dir) })
  t.test('three replicas behind the proxy, with monitoring', async (t) => {
    const files = ['docker-compose.yml', 'docker-compose.scale.yml', MONITORING_FILE, BUILD_NETWORK]
    const project = { name, dir, port: await freePort(), prometheusPort: await freePort(), files }
    await scaleTests(t, project)
  })
}
