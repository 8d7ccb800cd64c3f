import t from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DataDirInUseError, LOCK_FILE, lockDataDir } from '../../src/store/pglite/data-dir-lock.js'
import { openPglite } from '../../src/store/pglite/index.js'

t.test('one holder at a time; released, the directory is free again', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-lock-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const first = lockDataDir(dir)
  t.match(readFileSync(join(dir, LOCK_FILE), 'utf8'), `pid ${process.pid} on host `, 'the file says who holds it')
  t.throws(() => lockDataDir(dir), DataDirInUseError)
  t.throws(() => lockDataDir(dir), new RegExp(`^PGLITE_DATA_DIR: ${dir} is in use by another plant-store process \\(pid ${process.pid} on host .+\\)`))
  first.release()
  first.release()
  const second = lockDataDir(dir)
  second.release()
})

t.test('openPglite locks a directory until it closes; memory:// needs no lock', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-lock-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const db = await openPglite(dir)
  await t.rejects(openPglite(dir), DataDirInUseError)
  await db.close()
  const again = await openPglite(dir)
  await again.close()

  const a = await openPglite('memory://')
  const b = await openPglite('memory://')
  await a.close()
  await b.close()
})
