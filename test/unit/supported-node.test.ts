import t from 'tap'
import { execFile } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import semver from 'semver'
import { root } from '../support/processes.js'

// The supported Node lines are written in five places: engines (what npm
// checks), the client's engines, the README's Node section (what people
// read), the Dockerfile (what production runs) and .ci/run (what is tested).
// They must name the same lines, or one of them is a promise nobody keeps.

const read = (path: string): string => readFileSync(join(root, path), 'utf8')
const pkg = JSON.parse(read('package.json')) as { engines: { node: string }, scripts: Record<string, string>, devDependencies: Record<string, string> }
const client = JSON.parse(read('client/package.json')) as { engines: { node: string } }
const ci = read('.ci/run')
const readme = read('README.md')

// engines.node: one `^MAJOR.MINOR.PATCH` range per line, oldest first.
function lines (range: string): number[] {
  return range.split('||').map((part) => Number(/^\s*\^(\d+)\.\d+\.\d+\s*$/.exec(part)?.[1] ?? NaN))
}
const majorOf = (version: string): number => Number(version.split('.')[0])

const supported = lines(pkg.engines.node)
const newest = /^NODE_NEWEST=(\d+\.\d+\.\d+)$/m.exec(ci)?.[1] ?? ''
const others = (/^NODE_OTHERS=\(([\d. ]+)\)$/m.exec(ci)?.[1] ?? '').trim().split(/\s+/)
const section = /^## Node\.js versions\n([^]*?)\n## /m.exec(readme)?.[1] ?? ''

t.test('engines names whole even (LTS) lines, oldest first, and the client says the same', async (t) => {
  t.ok(supported.length >= 2 && supported.every((major) => Number.isInteger(major) && major % 2 === 0), `${pkg.engines.node}: ^MAJOR.MINOR.PATCH ranges of LTS lines`)
  t.same(supported, [...supported].sort((a, b) => a - b), 'oldest first')
  t.equal(client.engines.node, pkg.engines.node)
})

t.test('.ci/run tests every supported line: the whole suite on the newest, the process tier on the others', async (t) => {
  t.match(newest, /^\d+\.\d+\.\d+$/, 'NODE_NEWEST is an exact release')
  t.ok(others.every((v) => /^\d+\.\d+\.\d+$/.test(v)), 'NODE_OTHERS are exact releases')
  t.equal(majorOf(newest), Math.max(...supported), 'the whole suite runs on the newest line')
  t.same([newest, ...others].map(majorOf).sort((a, b) => a - b), supported, 'one release per supported line, none other')
  t.match(ci, /npx tap test\/process\/\*\.test\.ts/, 'the other lines run the process tier')
})

t.test('the image runs the newest supported line', async (t) => {
  const images = [...read('Dockerfile').matchAll(/^FROM\s+node:(\d+)-/gm)].map((m) => Number(m[1]))
  t.ok(images.length > 0)
  t.same(new Set(images), new Set([Math.max(...supported)]))
})

t.test('the README names each line, the exact release CI tests and the image', async (t) => {
  const rows = [...section.matchAll(/^\| (\d+) \|(.*)\|$/gm)].map((m) => ({ major: Number(m[1]), text: m[2] as string }))
  t.same(rows.map((r) => r.major).sort((a, b) => a - b), supported, 'one row per supported line')
  for (const version of [newest, ...others]) {
    t.ok(rows.some((r) => r.major === majorOf(version) && r.text.includes(version)), `the row for ${majorOf(version)} names ${version}`)
  }
  t.match(section, `\`${pkg.engines.node}\``, 'the section quotes engines')
  t.match(section, `node:${Math.max(...supported)}-bookworm-slim`, 'and the image')
})

t.test('@types/node follows the oldest supported line', async (t) => {
  t.equal(majorOf(pkg.devDependencies['@types/node'] ?? ''), supported[0])
})

// Every package of the lock file must install on the oldest release of each
// supported line: engine-strict (in .npmrc) makes npm refuse a package whose
// engines do not, so a line named here but refused there is a broken promise.
t.test('every locked package accepts the oldest release of each supported line', async (t) => {
  const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { engines?: { node?: string } }> }
  const floors = pkg.engines.node.split('||').map((part) => semver.minVersion(part.trim())?.version ?? '')
  const refusing = Object.entries(lock.packages).flatMap(([path, { engines }]) =>
    floors.filter((floor) => engines?.node !== undefined && !semver.satisfies(floor, engines.node)).map((floor) => `${path || 'plant-store'} (${engines?.node}) refuses ${floor}`))
  t.same(refusing, [])
})

// On an unsupported Node (the machine's own Node 20), npm's set-up commands
// stop with a line naming engines: `npm ci` through engine-strict, before
// anything is fetched; the scripts through scripts/supported-node.mjs, before
// tsx or any dependency loads.
const oldNode = '/usr/bin/node'
const exec = promisify(execFile)
async function npmOnOldNode (args: string[], cwd: string): Promise<{ code: number, output: string }> {
  const env = { PATH: `${dirname(oldNode)}:/bin`, HOME: mkdtempSync(join(tmpdir(), 'plant-store-npm-home-')), npm_config_cache: join(tmpdir(), 'plant-store-npm-cache-unused') }
  try {
    const { stdout, stderr } = await exec('npm', args, { cwd, env, timeout: 60_000 })
    return { code: 0, output: stdout + stderr }
  } catch (err) {
    const e = err as { code?: number, stdout?: string, stderr?: string }
    return { code: e.code ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` }
  } finally {
    rmSync(env.HOME, { recursive: true, force: true })
  }
}

t.test('on Node 20, npm ci, npm start and npm test stop with a line naming the supported lines', async (t) => {
  const { stdout: version } = await exec(oldNode, ['--version'])
  t.match(version, /^v20\./, `${oldNode} is the machine's Node 20`)
  // A copy of what these commands read, so that nothing could start here if the checks let it through.
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-old-node-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  for (const file of ['package.json', 'package-lock.json', '.npmrc', 'scripts/supported-node.mjs']) cpSync(join(root, file), join(dir, file))

  const ci = await npmOnOldNode(['ci', '--no-audit', '--no-fund'], dir)
  t.not(ci.code, 0, 'npm ci fails')
  t.match(ci.output, `Required: {"node":"${pkg.engines.node}"}`, 'naming engines')
  t.notOk(existsSync(join(dir, 'node_modules')), 'having installed nothing')

  const line = `plant-store: Node.js ${version.trim()} is not supported; use ${pkg.engines.node} (package.json "engines")`
  for (const script of ['start', 'test', 'run dev', 'run migrate']) {
    const run = await npmOnOldNode(script.split(' '), dir)
    t.not(run.code, 0, `npm ${script} fails`)
    // npm echoes the script first ("> plant-store@1.0.0 start", "> node …"); then the check's one line, alone.
    t.same(run.output.split('\n').filter((l) => l !== '' && !l.startsWith('> ')), [line], `npm ${script}: one line`)
  }
})

t.test('the check takes each supported line from its floor, and no other', async (t) => {
  const check = async (version: string) => await exec(process.execPath, [join(root, 'scripts/supported-node.mjs'), version]).then(() => 'ok', (err: { stderr: string }) => err.stderr.trim())
  t.equal(await check(process.versions.node), 'ok', `this Node (${process.versions.node})`)
  for (const floor of pkg.engines.node.split('||').map((part) => part.trim().slice(1))) {
    const [major, minor, patch] = floor.split('.').map(Number) as [number, number, number]
    t.equal(await check(floor), 'ok', floor)
    t.equal(await check(`${major}.99.0`), 'ok', `${major}.99.0`)
    const below = patch > 0 ? `${major}.${minor}.${patch - 1}` : minor > 0 ? `${major}.${minor - 1}.99` : `${major - 1}.99.0`
    t.match(await check(below), `Node.js v${below} is not supported`, below)
    t.match(await check(`${major + 1}.0.0`), 'is not supported', `${major + 1}.0.0`)
  }
  for (const name of ['start', 'dev', 'migrate', 'test', 'test:quick']) {
    t.match(pkg.scripts[name], /^node scripts\/supported-node\.mjs && /, `npm run ${name} runs the check first`)
  }
  t.match(read('.npmrc'), /^engine-strict=true$/m, 'npm ci refuses an unsupported Node')
})
