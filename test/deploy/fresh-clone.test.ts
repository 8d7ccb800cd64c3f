import t, { type Test } from 'tap'
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { TOKEN } from '../helper.js'
import { freePort, root } from '../support/processes.js'

// What a fresh clone gives people outside this checkout, the way they use it:
// a developer runs `npm start` (the source, with no compile step), and another
// team packs the client with `npm pack ./client`, installs the tarball in a
// project of its own and creates plants with it against that running service.
// The clone holds the committed tree, as another team's would. Its
// node_modules is this checkout's, which `npm ci` there would install from
// the same lock file; the other project installs the tarball with npm.

const exec = promisify(execFile)
const work = mkdtempSync(join(tmpdir(), 'plant-store-clone-'))
t.teardown(() => rmSync(work, { recursive: true, force: true }))
// Not named plant-store: the README's lines must not depend on the checkout's folder name.
const clone = join(work, 'a-checkout')
const other = join(work, 'other-service')
const tsc = join(root, 'node_modules/typescript/bin/tsc')

// `npm start` runs npm, a shell and node: started as a process group, so
// the teardown stops all of them.
function npmStart (t: Test, env: Record<string, string>): { child: ChildProcess, output: () => string } {
  const child = spawn('npm', ['start'], { cwd: clone, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout?.on('data', (d: Buffer) => { output += d.toString() })
  child.stderr?.on('data', (d: Buffer) => { output += d.toString() })
  const exited = once(child, 'close')
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    process.kill(-(child.pid as number), 'SIGTERM')
    const killer = setTimeout(() => { try { process.kill(-(child.pid as number), 'SIGKILL') } catch {} }, 10_000)
    await exited
    clearTimeout(killer)
  })
  return { child, output: () => output }
}

// The README's client lines ("Calling it"): `npm pack ./client …` and `npm install ./…tgz`, as argument lists.
function readmeClientLines (readme: string): [string[], string[]] {
  const line = (start: string): string[] => {
    const found = readme.split('\n').map((l) => l.replace(/#.*$/, '').trim()).find((l) => l.startsWith(start))
    if (found === undefined) throw new Error(`no README line starting ${start}`)
    return found.split(/\s+/).slice(1)
  }
  return [line('npm pack ./client'), line('npm install ./')]
}

async function ready (url: string, child: ChildProcess, output: () => string, timeoutMs = 90_000): Promise<void> {
  const started = Date.now()
  while (Date.now() - started < timeoutMs) {
    if (child.exitCode !== null) throw new Error(`npm start exited ${child.exitCode}:\n${output()}`)
    const status = await fetch(url, { signal: AbortSignal.timeout(2000) }).then((r) => r.status, () => 0)
    if (status === 200) return
    await sleep(200)
  }
  throw new Error(`${url} not 200 within ${timeoutMs} ms:\n${output()}`)
}

t.test('a fresh clone: npm start runs the source, and the packed client stores plants', async (t) => {
  await exec('git', ['clone', '--quiet', root, clone])
  symlinkSync(join(root, 'node_modules'), join(clone, 'node_modules'))

  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const service = npmStart(t, { PORT: String(port), HOST: '127.0.0.1', API_TOKENS: TOKEN, PGLITE_DATA_DIR: 'memory://', LOG_LEVEL: 'warn' })

  // Meanwhile, what the other team does: the README's two lines, the first in the
  // clone (packing into their project), the second in their project.
  mkdirSync(other)
  writeFileSync(join(other, 'package.json'), JSON.stringify({ name: 'other-service', private: true, type: 'module' }))
  const [pack, install] = readmeClientLines(readFileSync(join(clone, 'README.md'), 'utf8'))
  await exec('npm', pack.map((arg) => arg === '/path/to/calling-service' ? other : arg), { cwd: clone })
  const tarballs = readdirSync(other).filter((f) => f.endsWith('.tgz'))
  t.same(tarballs, ['plant-store-client-1.0.0.tgz'], 'one tarball, in the other project')
  const { stdout: status } = await exec('git', ['status', '--porcelain'], { cwd: clone })
  t.same(status.split('\n').filter((l) => l !== '' && l !== '?? node_modules'), [], 'nothing new in the clone but its node_modules link')
  const { stdout: listing } = await exec('tar', ['-tzf', join(other, tarballs[0] as string)])
  const files = listing.split('\n').filter((f) => f !== '')
  for (const file of ['package/package.json', 'package/dist/index.js', 'package/dist/index.d.ts']) {
    t.ok(files.includes(file), `the tarball holds ${file}: packing built the client`)
  }
  t.notOk(files.some((f) => f.startsWith('package/src/')), 'and no TypeScript source')

  await exec('npm', [...install, '--no-audit', '--no-fund', '--prefer-offline'], { cwd: other })
  const manifest = JSON.parse(readFileSync(join(other, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
  t.match(manifest.dependencies['@plant-store/client'], /^file:.*\.tgz$/, 'the other project depends on the tarball file')

  // The other team's code, type-checked against the installed package and
  // run as compiled: ids past 2^53 reach the service exactly, or the second
  // create (one less) would be the first's conflict.
  writeFileSync(join(other, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2023', lib: ['es2023', 'dom'], types: [], strict: true, outDir: 'out' },
    files: ['create.ts']
  }))
  writeFileSync(join(other, 'create.ts'), `import { createPlantStoreClient, type CreatePlantResult } from '@plant-store/client'

const plants = createPlantStoreClient({ baseUrl: ${JSON.stringify(base)}, token: ${JSON.stringify(TOKEN)} })
const answers: Array<{ status: number, name?: string }> = []
const creates: Array<[bigint, string]> = [[9007199254740993n, 'Monstera'], [9007199254740992n, 'Ficus'], [9007199254740993n, 'Monstera'], [9007199254740993n, 'Ficus']]
for (const [id, name] of creates) {
  const result: CreatePlantResult = await plants.createPlant({ id, name })
  answers.push(result.ok ? { status: result.status, name: result.plant.name } : { status: result.status })
}
console.log(JSON.stringify(answers))
`)
  await exec(process.execPath, [tsc, '-p', other], { cwd: other })

  await ready(`${base}/health/ready`, service.child, service.output)
  t.notOk(existsSync(join(clone, 'dist')), 'npm start compiled nothing: no dist/ in the clone')
  const { stdout } = await exec(process.execPath, [join(other, 'out/create.js')], { cwd: other })
  t.same(JSON.parse(stdout), [
    { status: 200, name: 'Monstera' },
    { status: 200, name: 'Ficus' },
    { status: 200, name: 'Monstera' },
    { status: 409 }
  ], 'created, created (another id), replayed, conflict')
})
