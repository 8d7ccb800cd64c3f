import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { jsonLines, root, spawnProcess } from '../support/processes.js'

// `npm run migrate` as a process of its own: it applies the migrations once,
// exits 0, and refuses a bad setting with one line naming the variable.

t.test('npm run migrate applies the migrations once and fails loudly on a bad setting', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'plant-migrate-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  // What `npm run migrate` runs, without npm in between.
  const run = async (env: Record<string, string>) => {
    const proc = spawnProcess(t, ['node', '--import', 'tsx', 'src/bin/migrate.ts'], root, env)
    const { code } = await proc.exited
    return { code, logs: jsonLines(proc.stdout()).lines, stderr: proc.stderr() }
  }
  const first = await run({ PGLITE_DATA_DIR: dataDir })
  t.equal(first.code, 0, 'exit 0')
  t.ok(first.logs.some((l) => l.msg === 'migrations applied'), 'the first run applies them')
  const second = await run({ PGLITE_DATA_DIR: dataDir })
  t.equal(second.code, 0, 'exit 0 again')
  t.ok(second.logs.some((l) => l.msg === 'schema up to date'), 'the second finds nothing to do')
  const bad = await run({ DATABASE_URL: 'not a url' })
  t.not(bad.code, 0, 'a bad setting: non-zero exit')
  t.match(bad.stderr, /^plant-store: DATABASE_URL: /, 'naming the variable')
})
