// The store run's PostgreSQL (bench/store.ts): a throwaway cluster of the
// machine's PostgreSQL 15 binaries on a port of its own, in a temporary
// directory, started with the settings docker-compose.yml gives its db
// service (that file is their one source), or PostgreSQL's defaults, or a
// list to try. Stopped and removed afterwards, also when the bench fails or
// is interrupted; the server on 5432 is never touched.
import { execFileSync } from 'node:child_process'
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parse } from 'yaml'
import { withClient } from '../test/support/database.js'

const PG_BIN = '/usr/lib/postgresql/15/bin'

export interface StoreCluster {
  // postgres://postgres@127.0.0.1:PORT/postgres
  url: string
  // The -c settings it runs with, name=value.
  settings: string[]
  stop(): void
}

// The `-c name=value` settings of docker-compose.yml's db command.
export function composeSettings (): string[] {
  const compose = parse(readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8')) as { services: { db?: { command?: string | string[] } } }
  const command = compose.services.db?.command ?? []
  const words = typeof command === 'string' ? command.split(/\s+/) : command
  return words.flatMap((word, i) => words[i - 1] === '-c' ? [word] : [])
}

// BENCH_STORE_SETTINGS: "compose" (the default), "default" (PostgreSQL's
// own), or name=value,… to try.
export function chosenSettings (choice = 'compose'): string[] {
  if (choice === 'compose') return composeSettings()
  if (choice === 'default') return []
  const settings = choice.split(',').map((s) => s.trim()).filter((s) => s !== '')
  if (!settings.every((s) => /^\w+=\S+$/.test(s))) throw new Error('BENCH_STORE_SETTINGS is compose, default or name=value,…')
  return settings
}

// initdb refuses root: as root, the cluster is the postgres user's.
function asClusterOwner (command: string, args: string[]): void {
  const root = process.getuid?.() === 0
  const [file, argv] = root ? ['runuser', ['-u', 'postgres', '--', join(PG_BIN, command), ...args]] : [join(PG_BIN, command), args]
  execFileSync(file, argv, { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600_000 })
}

function ownedByClusterOwner (dir: string): void {
  if (process.getuid?.() !== 0) return
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim())
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim())
  chownSync(dir, uid, gid)
}

// Stops the cluster and removes its directory, once, however the bench
// ends: normally, by an exception (the caller's finally) or by a signal.
function remover (dir: string, dataDir: string): () => void {
  let done = false
  const remove = (): void => {
    if (done) return
    done = true
    try { asClusterOwner('pg_ctl', ['stop', '-D', dataDir, '-m', 'fast', '-w', '-t', '120']) } catch {}
    rmSync(dir, { recursive: true, force: true })
  }
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      console.error(`\n${signal}: stopping and removing the bench's PostgreSQL cluster in ${dir}`)
      remove()
      process.exit(128 + (signal === 'SIGHUP' ? 1 : signal === 'SIGINT' ? 2 : 15))
    })
  }
  return remove
}

export async function startStoreCluster (port: number, settings: string[]): Promise<StoreCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-cluster-'))
  ownedByClusterOwner(dir)
  const dataDir = join(dir, 'data')
  const stop = remover(dir, dataDir)
  try {
    asClusterOwner('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'])
    const options = [`-p ${port}`, '-c listen_addresses=127.0.0.1', `-k ${dir}`, ...settings.map((s) => `-c ${s}`)]
    asClusterOwner('pg_ctl', ['start', '-D', dataDir, '-w', '-t', '60', '-l', join(dir, 'log'), '-o', options.join(' ')])
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`
    await waitForServer(url)
    return { url, settings, stop }
  } catch (err) {
    stop()
    throw err
  }
}

async function waitForServer (url: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await withClient(url, async (c) => await c.query('SELECT 1'))
      return
    } catch (err) {
      if (i >= 50) throw err
      await sleep(200)
    }
  }
}
