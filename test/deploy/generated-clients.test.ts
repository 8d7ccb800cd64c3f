import t, { type Test } from 'tap'
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { TOKEN } from '../helper.js'
import { root, startServerProcess } from '../support/processes.js'

// What docs/api.md ("Generating your own client") tells a caller who generates
// a client with hey-api or orval, done as written: its files are copied from
// the page (with a running service's URL for http://127.0.0.1:3000), the
// client is generated from that service's /openapi.json by the pinned
// generator, type-checked, and run. Then the service is asked what it stored:
// the same create again answers 200 and another name under the same id 409,
// so 9007199254740993 holds what the generated client sent. Beside it, the
// traps the page warns of: the default settings send 9007199254740992 and get
// a 200, hey-api's own serializer sends a bigint as a string, orval's fetch
// client throws on one.

const exec = promisify(execFile)
const ID = '9007199254740993'
const ROUNDED = '9007199254740992'
const DOCS_URL = 'http://127.0.0.1:3000'

const work = mkdtempSync(join(tmpdir(), 'plant-store-generated-'))
t.teardown(() => rmSync(work, { recursive: true, force: true }))
// The generated code and the page's files resolve the generators, TypeScript and tsx from this checkout.
symlinkSync(join(root, 'node_modules'), join(work, 'node_modules'))

// The page's code blocks, by the file named on their first line (`// orval.config.ts`).
const page = readFileSync(join(root, 'docs/api.md'), 'utf8')
function docsFile (name: string): string {
  const block = [...page.matchAll(/^```ts\n(\/\/ ([^\n]+)\n[^]*?)^```$/gm)].find((m) => m[2] === name)
  if (block === undefined) throw new Error(`docs/api.md has no ts block starting // ${name}`)
  return block[1] as string
}

function write (path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, text)
}

// A generator, tsc or tsx with this Node; its stdout, or an error that carries its output.
async function node (args: string[], cwd: string, env: Record<string, string> = {}): Promise<string> {
  const options = { cwd, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: 60_000 }
  return await exec(process.execPath, args, options).then(({ stdout }) => stdout, (err: { stdout?: string, stderr?: string }) => {
    throw new Error(`node ${args.join(' ')} in ${cwd} failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`)
  })
}

// A caller's project: ES modules, TypeScript in src/ checked strictly.
function project (name: string): string {
  const dir = join(work, name)
  write(join(dir, 'package.json'), JSON.stringify({ private: true, type: 'module' }))
  write(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, skipLibCheck: true, target: 'es2022', module: 'esnext', moduleResolution: 'bundler', lib: ['es2023', 'dom'], types: ['node'] },
    include: ['src']
  }))
  return dir
}

// The project type-checked, then its src/run.ts run with tsx: its one line of JSON.
async function checkAndRun (dir: string, url: string): Promise<Record<string, unknown>> {
  await node([join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], dir)
  const out = await node([join(root, 'node_modules/tsx/dist/cli.mjs'), 'src/run.ts'], dir, { PLANT_STORE_URL: url, PLANT_STORE_TOKEN: TOKEN })
  return JSON.parse(out) as Record<string, unknown>
}

// A create sent as exact JSON text, as curl would: its status.
async function create (url: string, id: string, name: string): Promise<number> {
  const response = await fetch(`${url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: `{"id":${id},"name":${JSON.stringify(name)}}`
  })
  await response.arrayBuffer()
  return response.status
}

// What the creates left in the store, asked before anything else is stored: another plant under an id is a
// conflict (something is stored there), the same plant again a replay (and it is that plant).
async function assertStored (t: Test, url: string): Promise<void> {
  t.equal(await create(url, ROUNDED, 'another name'), 409, 'the default settings stored a plant under 9007199254740992')
  t.equal(await create(url, ROUNDED, 'rounded'), 200, 'their plant')
  t.equal(await create(url, ID, 'another name'), 409, 'the documented client stored a plant under 9007199254740993')
  t.equal(await create(url, ID, 'exact'), 200, 'its plant')
}

// One service for each generator, started at once: starting them is much of the file's time. A start that fails
// fails the test that awaits it.
const services = { heyApi: startServerProcess({}), orval: startServerProcess({}) }
for (const service of Object.values(services)) service.catch(() => {})
t.teardown(async () => { await Promise.allSettled(Object.values(services).map(async (service) => await (await service).stop())) })

t.test('hey-api, configured as docs/api.md says, sends 9007199254740993 exactly', async (t) => {
  const server = await services.heyApi
  const dir = project('hey-api')
  write(join(dir, 'openapi-ts.config.ts'), docsFile('openapi-ts.config.ts').replaceAll(DOCS_URL, server.url))
  write(join(dir, 'src/plant-store-client.ts'), docsFile('src/plant-store-client.ts'))
  const openapiTs = join(root, 'node_modules/@hey-api/openapi-ts/bin/run.js')
  await Promise.all([
    node([openapiTs], dir),
    // The trap: hey-api's default plugins (run elsewhere: in dir it would read the page's config too).
    node([openapiTs, '-i', `${server.url}/openapi.json`, '-o', join(dir, 'src/naive')], work)
  ])
  write(join(dir, 'src/run.ts'), `import { createClient, createConfig } from './plant-store/client'
import { createPlant } from './plant-store-client'
import { client as naiveClient } from './naive/client.gen'
import { createPlant as naiveCreatePlant } from './naive/sdk.gen'

const settings = { baseUrl: process.env.PLANT_STORE_URL, auth: process.env.PLANT_STORE_TOKEN }
naiveClient.setConfig(settings)
const ownSerializer = createClient(createConfig(settings))
const status = async (result: Promise<{ response?: Response }>): Promise<number | undefined> => (await result).response?.status

console.log(JSON.stringify({
  rounded: await status(naiveCreatePlant({ body: { id: ${ID}, name: 'rounded' } })),
  ownSerializer: await status(createPlant({ client: ownSerializer, body: { id: ${ID}n, name: 'sent as a string' } })),
  exact: await status(createPlant({ body: { id: ${ID}n, name: 'exact' } }))
}))
`)
  t.same(await checkAndRun(dir, server.url), { rounded: 200, ownSerializer: 400, exact: 200 },
    'the default settings answer 200 (for another id), hey-api\'s own serializer 400, the documented client 200')
  await assertStored(t, server.url)
})

t.test('orval, configured as docs/api.md says, sends 9007199254740993 exactly', async (t) => {
  const server = await services.orval
  const dir = project('orval')
  write(join(dir, 'orval.config.ts'), docsFile('orval.config.ts').replaceAll(DOCS_URL, server.url))
  write(join(dir, 'src/plant-store-fetch.ts'), docsFile('src/plant-store-fetch.ts'))
  // The documented project and, beside it, the traps: the fetch client with and without useBigInt.
  write(join(dir, 'all.config.ts'), `import { defineConfig } from 'orval'
import documented from './orval.config'

const input = '${server.url}/openapi.json'
export default defineConfig({
  ...documented,
  naive: { input, output: { target: 'src/naive/plants.ts', client: 'fetch', baseUrl: '${server.url}' } },
  fetchBigInt: { input, output: { target: 'src/fetch-bigint/plants.ts', client: 'fetch', baseUrl: '${server.url}', override: { useBigInt: true } } }
})
`)
  await node([join(root, 'node_modules/orval/dist/bin/orval.mjs'), '--config', 'all.config.ts'], dir)
  write(join(dir, 'src/run.ts'), `import { createPlant } from './plant-store/plants'
import { PlantStoreError } from './plant-store-fetch'
import { createPlant as naiveCreatePlant } from './naive/plants'
import { createPlant as fetchCreatePlant } from './fetch-bigint/plants'

const auth = { headers: { Authorization: \`Bearer \${process.env.PLANT_STORE_TOKEN}\` } }
const outcome = async (created: Promise<unknown>): Promise<number | string> =>
  await created.then(() => 200, (err: unknown) => err instanceof PlantStoreError ? err.status : String(err))

console.log(JSON.stringify({
  rounded: (await naiveCreatePlant({ id: ${ID}, name: 'rounded' }, auth)).status,
  fetchClient: await outcome(fetchCreatePlant({ id: ${ID}n, name: 'never sent' }, auth)),
  exact: await outcome(createPlant({ id: ${ID}n, name: 'exact' })),
  conflict: await outcome(createPlant({ id: ${ID}n, name: 'another name' }))
}))
`)
  t.same(await checkAndRun(dir, server.url), { rounded: 200, fetchClient: 'TypeError: Do not know how to serialize a BigInt', exact: 200, conflict: 409 },
    'the fetch client answers 200 for another id, or throws on a bigint; the documented client 200, then 409 for another name')
  await assertStored(t, server.url)
})
