// The image, built and run by a real Docker engine: `npm run test:container`
// (not part of `npm test`). The engine comes from docker-up (see docker.ts);
// without one, this says why and runs nothing. Host network only: every
// container listens on 127.0.0.1 at a free port given in PORT.
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createTestDatabase } from '../helper.js'
import { withClient } from '../support/database.js'
import { freePort, jsonLines, root } from '../support/processes.js'
import { request } from '../support/http.js'
import { appliedVersions, migrationVersions } from '../support/postgres.js'
import { openSlowUpload } from '../support/slow-client.js'
import {
  docker, dockerOk, dockerUp, logs, removeLeftovers, removeThisRun, runArgs, startContainer, state, createVolume,
  waitHealthy, waitReady, waitUntil, answers
} from '../support/docker.js'

const IMAGE = 'plant-store-app:test'
const DOCKER_STOP_DEFAULT_MS = 10_000
process.env.TEST_DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/postgres'

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`

const createPlant = async (port: number, token: string, body: string): Promise<{ status: number, body: string }> =>
  await request(`http://127.0.0.1:${port}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body
  })

// From `docker run` to ready and to healthy, as the closing note reports them.
async function startTimed (t: Test, name: string, port: number, env: Record<string, string>, volumes: string[] = []):
Promise<{ container: string, readyMs: number, healthyMs: number }> {
  const started = performance.now()
  const container = await startContainer(IMAGE, name, { env: { HOST: '127.0.0.1', PORT: String(port), ...env }, volumes, fastHealth: true })
  await waitReady(container, port)
  const readyMs = performance.now() - started
  await waitHealthy(container)
  const healthyMs = performance.now() - started
  t.pass(`${name}: ready after ${secs(readyMs)}, healthy after ${secs(healthyMs)} (health interval 1 s)`)
  return { container, readyMs, healthyMs }
}

// `docker stop` with its default timeout while a slow upload is open.
async function stopWithSlowClient (t: Test, container: string, port: number, token: string): Promise<void> {
  const slow = await openSlowUpload(port, token)
  t.teardown(() => slow.destroy())
  const stop = await docker(['stop', container], 60_000)
  const s = await state(container)
  t.equal(stop.code, 0, 'docker stop succeeded')
  t.equal(s.ExitCode, 0, `exit code 0 (docker stop took ${secs(stop.ms)})`)
  t.ok(stop.ms < DOCKER_STOP_DEFAULT_MS, `stopped before the engine's ${DOCKER_STOP_DEFAULT_MS} ms SIGKILL (${secs(stop.ms)})`)
  t.equal((await slow.closed).response, '', 'the slow client was cut off without an answer')
  const out = await logs(container)
  t.ok(jsonLines(out.stdout).lines.some((l) => l.msg === 'stopped'), 'the service logged that it stopped')
  t.notOk(out.stdout.includes('killed by timeout'), 'not the last-resort exit')
}

// A one-line refusal: everything the container printed, in one line.
function oneLine (run: { stdout: string, stderr: string }): string[] {
  return `${run.stdout}\n${run.stderr}`.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('npm '))
}

function defineTests (): void {
  t.test('the image: non-root, production dependencies only, no sources, tests or secrets', async (t) => {
    const [inspect] = JSON.parse(await dockerOk(['image', 'inspect', IMAGE])) as Array<{ Size: number, Config: { User: string, Env: string[] } }>
    t.comment(`image size ${(inspect?.Size ?? 0) / 1e6} MB`)
    t.equal(inspect?.Config.User, 'node', 'USER node')
    t.notOk(inspect?.Config.Env.some((e) => /TOKEN|PASSWORD|SECRET/i.test(e)), 'no secret in the image environment')

    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string>, engines: { node: string } }
    // Dev-only packages as the lock file marks them: typescript, tap, tsx and
    // everything only they pull in (yaml, say, is also a production package's).
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> }
    const devOnly = Object.entries(lock.packages)
      .filter(([path, p]) => p.dev === true && /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path))
      .map(([path]) => path.slice('node_modules/'.length))
    // Run inside the image: what a person would look at with a shell.
    const script = `
      const fs = require('node:fs'), path = require('node:path'), os = require('node:os')
      const has = (n) => fs.existsSync(path.join('/app/node_modules', n, 'package.json'))
      const walk = (d) => fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => {
        const p = path.join(d, e.name)
        return e.name === 'node_modules' ? [] : e.isDirectory() ? [p + '/', ...walk(p)] : [p]
      })
      const names = JSON.parse(process.env.NAMES)
      console.log(JSON.stringify({
        uid: process.getuid(), node: process.version,
        dev: names.dev.filter(has), prod: names.prod.filter(has),
        files: walk('/app'),
        npmrc: ['/app/.npmrc', path.join(os.homedir(), '.npmrc'), '/usr/local/etc/npmrc'].filter((f) => fs.existsSync(f)),
        scripts: JSON.parse(fs.readFileSync('/app/package.json', 'utf8')).scripts
      }))`
    const names = JSON.stringify({ dev: devOnly, prod: Object.keys(pkg.dependencies) })
    const out = await dockerOk(runArgs(IMAGE, { env: { NAMES: names }, argv: ['node', '-e', script] }, ['--rm']))
    const seen = JSON.parse(out) as { uid: number, node: string, dev: string[], prod: string[], files: string[], npmrc: string[], scripts: Record<string, string> }
    t.not(seen.uid, 0, `runs as uid ${seen.uid}, not root`)
    const newest = Math.max(...[...pkg.engines.node.matchAll(/\^(\d+)\./g)].map((m) => Number(m[1])))
    t.equal(Number(/^v(\d+)\./.exec(seen.node)?.[1]), newest, `runs Node ${seen.node}, the newest line engines names`)
    t.ok(devOnly.includes('typescript') && devOnly.includes('tap') && devOnly.includes('tsx'), `${devOnly.length} dev-only packages to look for`)
    t.same(seen.dev, [], 'none of them installed')
    t.same(seen.prod, Object.keys(pkg.dependencies), 'every production dependency installed')
    t.same(seen.files.filter((f) => /\.(ts|tsx|mts|cts)$/.test(f)), [], 'no TypeScript sources')
    t.same(seen.files.filter((f) => /^\/app\/(src|test|bench|scripts|secrets|plugins|routes)\//.test(f)), [], 'no source, test, bench or secrets folder')
    t.same(seen.files.filter((f) => /(^|\/)\.env|secret|token|\.pem$|\.key$|\.npmrc$/i.test(f)), [], 'no secret-looking file')
    t.same(seen.npmrc, [], 'no .npmrc')
    t.ok(seen.files.includes('/app/dist/server.js') && seen.files.includes('/app/dist/src/bin/migrate.js'), 'the compiled service and migrate')
    t.equal(seen.scripts.migrate, 'node dist/src/bin/migrate.js', 'npm run migrate runs the compiled JavaScript')
    const history = await dockerOk(['history', '--no-trunc', '--format', '{{.CreatedBy}}', IMAGE])
    t.notOk(/API_TOKENS=\S|PASSWORD=\S/.test(history), 'no secret in the build history')
  })

  t.test('PGlite on a named volume: serves, healthy, stops with exit 0, keeps the plant, one writer', async (t) => {
    const volume = await createVolume('pglite')
    const token = randomBytes(16).toString('hex')
    const port = await freePort()
    const env = { API_TOKENS: token }
    const { container } = await startTimed(t, 'pglite', port, env, [`${volume}:/app/.data`])

    const created = await createPlant(port, token, '{"id": 1, "name": "Monstera", "tag": "indoor"}')
    t.equal(created.status, 200, 'a create answers 200')
    t.same(JSON.parse(created.body), { name: 'Monstera', tag: 'indoor' })
    await stopWithSlowClient(t, container, port, token)

    const restarted = performance.now()
    await dockerOk(['start', container])
    await waitReady(container, port)
    t.comment(`restart to ready: ${secs(performance.now() - restarted)}`)
    t.equal((await createPlant(port, token, '{"id": 1, "name": "Fern"}')).status, 409, 'after a restart, a conflicting create answers 409: the plant was kept')
    t.equal((await createPlant(port, token, '{"id": 1, "name": "Monstera", "tag": "indoor"}')).status, 200, 'the same plant again answers 200')

    // A second container on the same volume must refuse, not open the same
    // database files beside the first (PGlite has one writer).
    const otherPort = await freePort()
    const second = await startContainer(IMAGE, 'pglite-second', { env: { HOST: '127.0.0.1', PORT: String(otherPort), ...env }, volumes: [`${volume}:/app/.data`] })
    let serving = false
    await waitUntil(second, 'refusing', async () => {
      serving = await answers(`http://127.0.0.1:${otherPort}/health/live`)
      return serving
    }, 90_000).catch(() => {})
    const refused = await state(second)
    const out = await logs(second)
    t.notOk(serving, 'the second container never serves')
    t.equal(refused.Running, false, 'the second container stopped')
    t.not(refused.ExitCode, 0, `with a non-zero exit (${refused.ExitCode})`)
    const lines = oneLine(out)
    t.equal(lines.length, 1, `one line:\n${lines.join('\n')}`)
    t.match(lines[0] ?? '', /PGLITE_DATA_DIR/, 'naming PGLITE_DATA_DIR')
    t.ok(await answers(`http://127.0.0.1:${port}/health/ready`), 'the first container still serves')
    await docker(['rm', '-f', second])
    const stop = await docker(['stop', container], 60_000)
    t.equal((await state(container)).ExitCode, 0, `the first stops with exit 0 (${secs(stop.ms)})`)
  })

  t.test('PostgreSQL, production, tokens from a secret file: migrate, serve an exact int64, no token logged', async (t) => {
    const testDb = await createTestDatabase('postgres') as { url: string, drop: () => Promise<void> }
    t.teardown(() => testDb.drop())
    const dir = mkdtempSync(join(tmpdir(), 'plant-store-container-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const tokens = [randomBytes(24).toString('hex'), randomBytes(24).toString('hex')]
    const tokensFile = join(dir, 'api_tokens.txt')
    writeFileSync(tokensFile, `# plant store tokens\n${tokens.join('\n')}\n`)
    chmodSync(tokensFile, 0o644)
    const secret = `${tokensFile}:/run/secrets/api_tokens:ro`

    const migrate = await docker(runArgs(IMAGE, { env: { DATABASE_URL: testDb.url }, argv: ['npm', 'run', 'migrate'] }, ['--rm']), 120_000)
    t.equal(migrate.code, 0, `npm run migrate in the image exits 0${migrate.code === 0 ? '' : `:\n${migrate.stdout}\n${migrate.stderr}`}`)
    t.same(await appliedVersions(testDb.url), migrationVersions(), 'it applied every migration')

    const port = await freePort()
    const { container } = await startTimed(t, 'postgres', port, { DATABASE_URL: testDb.url, API_TOKENS_FILE: '/run/secrets/api_tokens' }, [secret])
    const created = await createPlant(port, tokens[1] as string, '{"id": 9007199254740993, "name": "Monstera"}')
    t.equal(created.status, 200, 'a create with the second token answers 200')
    const stored = await withClient(testDb.url, (c) => c.query<{ id: string }>('SELECT id::text AS id FROM plants'))
    t.same(stored.rows.map((r) => r.id), ['9007199254740993'], 'the id past 2^53 is stored exactly')

    await stopWithSlowClient(t, container, port, tokens[0] as string)
    const out = await logs(container)
    const { lines, other } = jsonLines(out.stdout)
    t.same(other, [], 'production logs are JSON lines only')
    t.equal(out.stderr, '', 'nothing on stderr')
    t.ok(lines.some((l) => l.msg === 'schema up to date'), 'the service found the schema migrate had applied')
    t.notOk(tokens.some((tok) => out.stdout.includes(tok) || out.stderr.includes(tok)), 'no token in docker logs')

    const refusedPort = await freePort()
    const noToken = await docker(runArgs(IMAGE, { env: { HOST: '127.0.0.1', PORT: String(refusedPort), DATABASE_URL: testDb.url } }, ['--rm']), 120_000)
    t.not(noToken.code, 0, `production without a token exits non-zero (${noToken.code})`)
    const refusal = oneLine(noToken)
    t.equal(refusal.length, 1, `with one line: ${refusal.join(' | ')}`)
    t.match(refusal[0] ?? '', /API_TOKENS/, 'naming the missing setting')
  })

  t.test('three containers started at once on one database apply the migrations once', async (t) => {
    const testDb = await createTestDatabase('postgres') as { url: string, drop: () => Promise<void> }
    t.teardown(() => testDb.drop())
    const token = randomBytes(16).toString('hex')
    const ports = [await freePort(), await freePort(), await freePort()]
    const containers = await Promise.all(ports.map(async (port, i) =>
      await startContainer(IMAGE, `replica-${i}`, { env: { HOST: '127.0.0.1', PORT: String(port), DATABASE_URL: testDb.url, API_TOKENS: token } })))
    await Promise.all(containers.map(async (c, i) => await waitReady(c, ports[i] as number)))
    const applied = []
    for (const c of containers) {
      const { lines } = jsonLines((await logs(c)).stdout)
      applied.push(...lines.filter((l) => l.msg === 'migrations applied'))
      t.ok(lines.some((l) => l.msg === 'migrations applied' || l.msg === 'schema up to date'), `${c}: migrated or found the schema`)
    }
    t.equal(applied.length, 1, 'exactly one container applied the migrations')
    t.same(await appliedVersions(testDb.url), migrationVersions(), 'each migration recorded once')
    const results = await Promise.all(ports.map(async (port, i) => (await createPlant(port, token, `{"id": ${i + 1}, "name": "p${i}"}`)).status))
    t.same(results, [200, 200, 200], 'every replica serves')
    const stops = await Promise.all(containers.map(async (c) => { await docker(['stop', c], 60_000); return (await state(c)).ExitCode }))
    t.same(stops, [0, 0, 0], 'each stops with exit 0')
  })
}

const engine = dockerUp()
if (!engine.ok) {
  t.comment(`no Docker engine: ${engine.reason}`)
  t.plan(0, `no Docker engine, nothing run: ${engine.reason}`)
} else {
  await removeLeftovers()
  t.teardown(removeThisRun)
  const build = await docker(['build', '--network', 'host', '-t', IMAGE, '.'], 20 * 60_000)
  t.comment(`docker build: ${(build.ms / 1000).toFixed(1)} s`)
  if (build.code !== 0) {
    t.fail(`docker build exited ${build.code}:\n${build.stdout.slice(-4000)}\n${build.stderr.slice(-4000)}`)
  } else {
    defineTests()
  }
}
