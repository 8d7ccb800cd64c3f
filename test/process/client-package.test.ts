import t from 'tap'
import { execFile } from 'node:child_process'
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'

// The client package's types are openapi-typescript's output for the
// committed openapi.json (`npm run openapi` writes both), and the package
// declares the same pinned openapi-fetch the root lock file installs.

const root = fileURLToPath(new URL('../../', import.meta.url))
const generated = join(root, 'client/src/generated/openapi.ts')
const cli = join(root, 'node_modules/openapi-typescript/bin/cli.js')

async function check (output: string): Promise<{ ok: boolean, text: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [cli, join(root, 'openapi.json'), '-o', output, '--check'], { cwd: root })
    return { ok: true, text: stdout + stderr }
  } catch (err) {
    const e = err as { stdout?: string, stderr?: string }
    return { ok: false, text: `${e.stdout ?? ''}${e.stderr ?? ''}` }
  }
}

t.test('client/src/generated/openapi.ts is what openapi-typescript makes of openapi.json', async (t) => {
  const result = await check(generated)
  t.ok(result.ok, `up to date (else run npm run openapi): ${result.text}`)
})

t.test('the check fails on types that were edited by hand', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'plant-store-types-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const copy = join(dir, 'openapi.ts')
  await copyFile(generated, copy)
  await writeFile(copy, (await readFile(copy, 'utf8')).replace('id: number;', 'id: number | bigint;'))
  t.notOk((await check(copy)).ok)
})

t.test('the client declares the openapi-fetch the root installs, pinned', async (t) => {
  const client = JSON.parse(await readFile(join(root, 'client/package.json'), 'utf8'))
  const rootPackage = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'))
  const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8'))
  const version = client.dependencies['openapi-fetch']
  t.match(version, /^\d+\.\d+\.\d+$/, 'an exact version')
  t.equal(rootPackage.devDependencies['openapi-fetch'], version)
  t.equal(lock.packages['node_modules/openapi-fetch'].version, version)
  t.same(client.engines, rootPackage.engines, 'the same Node versions as the service')
})
