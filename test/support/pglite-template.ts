import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openPglite } from '../../src/store/pglite/index.js'
import { migrate } from '../../src/store/migrations.js'
import { buildOnce, inputsHash, root } from './build-once.js'

// Creating a PGlite database (initdb) costs seconds and most of a gigabyte
// at its peak; opening an existing data directory costs a fraction of both.
// So the tests' embedded databases start as copies of one data directory,
// created and migrated once by the service's own openPglite and migrate,
// keyed by the migrations and the lock file (PGlite's version). A copy is
// an ordinary PGLITE_DATA_DIR, opened the way the server opens its own.
const cacheDir = join(root, 'node_modules', '.cache', 'plant-store-pglite')

export async function migratedTemplate (): Promise<string> {
  return await buildOnce(join(cacheDir, inputsHash(['migrations', 'package-lock.json'])), async (partial) => {
    const db = await openPglite(partial)
    try {
      await migrate(db)
    } finally {
      await db.close()
    }
  })
}

export interface MigratedDir {
  // The data directory: a copy of the template, for one opener.
  dataDir: string
  remove(): void
}

// Copies go to memory (tmpfs) where the machine has it: a commit there
// costs what it cost on memory:// (no fsync to a disk), so tests that race
// answers against commits see the timings they were written against.
const copies = existsSync('/dev/shm') ? '/dev/shm' : tmpdir()

// A migrated PGlite data directory of its own in a fresh temporary directory.
export async function migratedDataDir (): Promise<MigratedDir> {
  const template = await migratedTemplate()
  const parent = mkdtempSync(join(copies, 'plant-store-pglite-'))
  const dataDir = join(parent, 'pglite')
  cpSync(template, dataDir, { recursive: true })
  return { dataDir, remove: () => rmSync(parent, { recursive: true, force: true }) }
}

// The same, removed when the test ends: for process tests whose point is
// not initdb (the lock, a burst, a shutdown). Those that mean to create a
// new directory use tempDataDir (test/support/temp-dir.ts).
export async function migratedTempDataDir (t: { teardown(fn: () => unknown): void }): Promise<string> {
  const { dataDir, remove } = await migratedDataDir()
  t.teardown(remove)
  return dataDir
}
