import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

// Parents one at a time: mkdirSync(dir, { recursive }) spins forever where a parent refuses new entries with ENOENT
// (as /proc does; Node 22.23, 24.21 and 26.10), and a start-up that hangs tells an operator nothing.
export function makeWritableDirectory (dir: string): void {
  const path = resolve(dir)
  if (!existsSync(path)) {
    const parent = dirname(path)
    if (parent !== path) makeWritableDirectory(parent)
    mkdirSync(path)
  }
  if (!statSync(path).isDirectory()) throw new Error(`${path} is not a directory`)
  accessSync(path, constants.W_OK)
}
