import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, openSync, closeSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { jsonHeaders } from '../helper.js'
import { storedPlants } from '../support/database.js'
import { request } from '../support/http.js'
import { timeUntil } from '../support/postgres.js'
import { startServerProcess } from '../support/processes.js'

// The embedded database on a disk that fills up: no commit can happen, so
// /health/ready says not ready within a second; a create answered 503
// stored nothing; once there is room again the service is ready with no
// restart. The disk is a small tmpfs of the test's own.

const DISK_MB = 96
// 1 s, plus the slack a loaded 2-core machine needs.
const READY_BOUND_MS = 1000 + 1500

function mountable (): string | false {
  if (process.getuid?.() !== 0) return 'needs root (to mount a tmpfs)'
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-mount-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' })
    execFileSync('umount', [dir], { stdio: 'ignore' })
    return false
  } catch {
    return 'needs permission to mount a tmpfs'
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

// Fills the file system under dir; returns the filler's path.
function fill (dir: string): string {
  const path = join(dir, 'filler')
  const fd = openSync(path, 'w')
  const chunk = Buffer.alloc(1024 * 1024, 1)
  try {
    for (let i = 0; i < DISK_MB * 2; i++) writeSync(fd, chunk)
  } catch {
    // ENOSPC: full.
  } finally {
    closeSync(fd)
  }
  return path
}

t.test('a full disk under the embedded database: not ready, and a 503 stored nothing', { skip: mountable() }, async (t) => {
  const disk = mkdtempSync(join(tmpdir(), 'plant-store-disk-'))
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${DISK_MB}m`, 'tmpfs', disk])
  t.teardown(() => {
    execFileSync('umount', ['-l', disk])
    rmSync(disk, { recursive: true, force: true })
  })
  const dataDir = join(disk, 'data')
  const server = await startServerProcess({ env: { PGLITE_DATA_DIR: dataDir, DB_TIMEOUT_MS: '2000' }, startTimeoutMs: 60_000 })
  t.teardown(() => server.stop())
  await timeUntil(async () => (await request(`${server.url}/health/ready`)).status === 200, 30_000, 100)
  const create = async (id: number): Promise<number> =>
    (await request(`${server.url}/plants`, { method: 'POST', headers: jsonHeaders(), body: JSON.stringify({ id, name: `p${id}`.repeat(200) }) })).status
  t.equal(await create(1), 200, 'a create before the disk fills')

  const filler = fill(disk)
  const statuses = new Map<number, number>()
  for (let id = 100; id < 140; id += 8) {
    const batch = await Promise.all(Array.from({ length: 8 }, async (_, i) => [id + i, await create(id + i)] as const))
    for (const [i, status] of batch) statuses.set(i, status)
  }
  const probes = []
  for (let i = 0; i < 3; i++) {
    const start = performance.now()
    const res = await request(`${server.url}/health/ready`)
    probes.push({ status: res.status, ms: performance.now() - start })
  }
  const answered = [...statuses.values()]
  t.comment(`figures: full-disk creates=${answered.length} ok=${answered.filter((s) => s === 200).length} 503=${answered.filter((s) => s === 503).length} ready=${probes.map((p) => `${p.status}/${Math.round(p.ms)}ms`).join(',')}`)
  t.same(answered.filter((s) => s !== 200 && s !== 503), [], 'creates answer 200 or 503')
  t.same(probes.filter((p) => p.status !== 503 || p.ms > READY_BOUND_MS), [], `/health/ready answers 503 within ${READY_BOUND_MS} ms while the disk is full`)

  rmSync(filler)
  await timeUntil(async () => (await request(`${server.url}/health/ready`)).status === 200, 10_000, 100)
  t.pass('ready again once there is room, with no restart')
  t.equal(await server.stop(), 0, 'stops cleanly')
  const rows = new Set((await storedPlants(undefined, dataDir)).map((r) => Number(r.id)))
  t.same([...statuses].filter(([id, s]) => s === 503 && rows.has(id)).map(([id]) => id), [], 'no create answered 503 is stored')
  t.same([...statuses].filter(([id, s]) => s === 200 && !rows.has(id)).map(([id]) => id), [], 'every create answered 200 is stored')
})
