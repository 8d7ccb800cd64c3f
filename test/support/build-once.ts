import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('../..', import.meta.url))

// Things the tests build once and share, kept under node_modules/.cache and
// keyed by a hash of their inputs: tap runs test files in parallel, so the
// first file to need one builds it under a lock while the others wait, and
// a build is renamed into place whole, never seen half written.
const BUILD_WAIT_MS = 180_000

export async function buildOnce (dir: string, build: (partial: string) => Promise<void>): Promise<string> {
  const lock = `${dir}.lock`
  mkdirSync(dirname(dir), { recursive: true })
  const started = Date.now()
  while (!existsSync(dir)) {
    if (Date.now() - started > BUILD_WAIT_MS) throw new Error(`no build at ${dir} after ${BUILD_WAIT_MS} ms`)
    try {
      mkdirSync(lock)
    } catch {
      // Another test file is building; a lock left by a killed run goes stale.
      if (existsSync(lock) && Date.now() - statSync(lock).mtimeMs > BUILD_WAIT_MS) rmSync(lock, { recursive: true, force: true })
      await sleep(100)
      continue
    }
    try {
      const partial = `${dir}.partial`
      rmSync(partial, { recursive: true, force: true })
      await build(partial)
      renameSync(partial, dir)
    } finally {
      rmSync(lock, { recursive: true, force: true })
    }
  }
  return dir
}

function listFiles (path: string): string[] {
  if (!statSync(path).isDirectory()) return [path]
  return readdirSync(path).sort().flatMap((name) => listFiles(join(path, name)))
}

// A hash of the files under these paths (relative to the root), names and bytes.
export function inputsHash (paths: string[]): string {
  const hash = createHash('sha256')
  for (const file of paths.flatMap((p) => listFiles(join(root, p)))) {
    hash.update(relative(root, file)).update('\0').update(readFileSync(file)).update('\0')
  }
  return hash.digest('hex').slice(0, 16)
}
