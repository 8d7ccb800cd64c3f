import t, { type Test } from 'tap'
import { performance } from 'node:perf_hooks'
import { freePort, stageRuntime, startBuiltServer, type ServerProcess } from '../support/processes.js'
import { storedPlants } from '../support/database.js'
import { migratedTempDataDir } from '../support/pglite-template.js'

// One service process per PGLITE_DATA_DIR: two processes on one directory
// would each keep their own pages and lose each other's acknowledged
// creates. The lock is the kernel's, so a killed holder leaves none behind.
const TOKEN = 'data-dir-lock-token-41f9'
const PLANTS = 20

const create = async (url: string, id: number): Promise<number> => (await fetch(`${url}/plants`, {
  method: 'POST',
  headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
  body: JSON.stringify({ id, name: `plant ${id}` })
})).status

let runtime = ''
t.before(async () => { runtime = await stageRuntime() })

function start (t: Test, dataDir: string, port: number): ServerProcess & { url: string } {
  const server = startBuiltServer(t, runtime, { NODE_ENV: 'production', API_TOKENS: TOKEN, LOG_LEVEL: 'warn', PORT: String(port), PGLITE_DATA_DIR: dataDir })
  return Object.assign(server, { url: `http://127.0.0.1:${port}` })
}

t.test('a second process on the same directory refuses to start; the first keeps serving', async (t) => {
  const dataDir = await migratedTempDataDir(t)
  const first = start(t, dataDir, await freePort())
  await first.waitFor(`${first.url}/health/ready`)
  t.equal(await create(first.url, 1), 200)

  const second = start(t, dataDir, await freePort())
  const { code } = await second.exited
  t.not(code, 0, 'the second process exits non-zero')
  const lines = (second.stdout() + second.stderr()).trim().split('\n')
  t.equal(lines.length, 1, 'with one line')
  t.match(lines[0], new RegExp(`^plant-store: PGLITE_DATA_DIR: ${dataDir} is in use by another plant-store process \\(pid \\d+ on host `))

  t.equal(await create(first.url, 2), 200, 'the first still creates')
  t.equal((await fetch(`${first.url}/health/ready`)).status, 200, 'and is still ready')
  t.same(await first.stop(), { code: 0, signal: null })
  t.same((await storedPlants(undefined, dataDir)).map((p) => p.id), ['1', '2'])
})

t.test('a holder killed with SIGKILL does not block the next start, which keeps its plants', async (t) => {
  const dataDir = await migratedTempDataDir(t)
  const port = await freePort()
  const killed = start(t, dataDir, port)
  await killed.waitFor(`${killed.url}/health/ready`)
  const statuses = await Promise.all(Array.from({ length: PLANTS }, async (_, i) => await create(killed.url, i + 1)))
  t.same(statuses, Array(PLANTS).fill(200), 'every create acknowledged')
  t.same(await killed.stop('SIGKILL'), { code: null, signal: 'SIGKILL' })

  const started = performance.now()
  const next = start(t, dataDir, port)
  await next.waitFor(`${next.url}/health/ready`)
  t.comment(`restart after SIGKILL ready in ${Math.round(performance.now() - started)} ms`)
  for (let id = 1; id <= PLANTS; id++) t.equal(await create(next.url, id), 200, `plant ${id} replays`)
  t.same(await next.stop('SIGTERM'), { code: 0, signal: null }, 'a clean stop')

  const afterClean = start(t, dataDir, port)
  await afterClean.waitFor(`${afterClean.url}/health/ready`)
  t.equal(await create(afterClean.url, PLANTS + 1), 200, 'a clean stop releases the directory too')
  t.same(await afterClean.stop('SIGTERM'), { code: 0, signal: null })
  const stored = await storedPlants(undefined, dataDir)
  t.same(stored.map((p) => Number(p.id)).sort((a, b) => a - b), Array.from({ length: PLANTS + 1 }, (_, i) => i + 1), 'every acknowledged plant is stored')
  t.ok(stored.every((p) => p.name === `plant ${p.id}`))
})
