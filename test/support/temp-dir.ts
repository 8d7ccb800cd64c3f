import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

interface Teardown { teardown(fn: () => unknown): void }

// A PGlite data directory path in a fresh temporary directory that the
// test removes when it ends; the service creates the directory itself.
export function tempDataDir (t: Teardown, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `plant-store-${prefix}-`))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return join(dir, 'pglite')
}
