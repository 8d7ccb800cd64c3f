import { closeSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs'
import { createRequire } from 'node:module'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { ConfigError } from '../../config.js'

// Prebuilt binaries (no compiler in the image); on Linux an open-file-description lock (fcntl F_OFD_SETLK).
const native = createRequire(import.meta.url)('fs-native-extensions') as { tryLock(fd: number): boolean, unlock(fd: number): void }

// Inside the data directory, so a volume mounted at the directory carries the
// lock to every container that mounts it (PostgreSQL ignores the file).
export const LOCK_FILE = '.plant-store.lock'

export class DataDirInUseError extends ConfigError {
  override name = 'DataDirInUseError'
}

// Two PGlite instances on one directory overwrite each other's pages. The kernel's lock holds across containers
// sharing the volume and goes with the process however it ends; the pid and host in the file tell an operator who.
export function lockDataDir (dataDir: string): { release: () => void } {
  const path = join(dataDir, LOCK_FILE)
  const fd = openSync(path, 'a+')
  let granted = false
  try {
    granted = native.tryLock(fd)
  } finally {
    if (!granted) closeSync(fd)
  }
  if (!granted) {
    const holder = readFileSync(path, 'utf8').trim()
    throw new DataDirInUseError(
      `PGLITE_DATA_DIR: ${dataDir} is in use by another plant-store process` +
      `${holder === '' ? '' : ` (${holder})`}; one process per database directory`)
  }
  ftruncateSync(fd)
  writeSync(fd, `pid ${process.pid} on host ${hostname()}\n`)
  let released = false
  return {
    release () {
      if (released) return
      released = true
      ftruncateSync(fd)
      native.unlock(fd)
      closeSync(fd)
    }
  }
}
