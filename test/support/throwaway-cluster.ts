// A PostgreSQL 15 cluster of the test's own, on a free port, for stalls that
// must never touch a shared server: a synchronous standby that does not
// exist, a frozen server (SIGSTOP). It runs as the `postgres` user (initdb
// refuses root) and is stopped and removed by the test's teardown, also
// when the test fails.
import { execFileSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import type { Teardown } from '../helper.js'
import { freePort } from './processes.js'

const PG_BIN = '/usr/lib/postgresql/15/bin'

// Why this machine cannot run a throwaway cluster, or false when it can.
export const needsThrowawayCluster: string | false =
  process.getuid?.() !== 0
    ? 'needs root (to run a PostgreSQL cluster as the postgres user)'
    : !existsSync(`${PG_BIN}/initdb`) ? `needs PostgreSQL 15 binaries in ${PG_BIN}` : false

export interface ThrowawayCluster {
  // postgres://postgres@127.0.0.1:PORT/postgres
  readonly url: string
  // Runs one statement on a connection of its own (not the service's);
  // resolves with its rows.
  admin(sql: string): Promise<Array<Record<string, unknown>>>
  // Synchronous commit waits for a standby that never comes, or no longer.
  requireMissingStandby(on: boolean): Promise<void>
  // SIGSTOP (true) or SIGCONT (false) to the postmaster and every backend.
  freeze(on: boolean): void
}

function postgresIds (): { uid: number, gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'))
  if (line === undefined) throw new Error('no postgres user')
  const [, , uid, gid] = line.split(':')
  return { uid: Number(uid), gid: Number(gid) }
}

function asPostgres (command: string, args: string[]): void {
  execFileSync('runuser', ['-u', 'postgres', '--', join(PG_BIN, command), ...args], { stdio: 'ignore', timeout: 120_000 })
}

// The postmaster (first line of postmaster.pid) and its children.
function clusterPids (dataDir: string): number[] {
  let postmaster: number
  try {
    postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
  } catch {
    return []
  }
  const pids = [postmaster]
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === postmaster) pids.push(Number(entry))
    } catch {
      // Gone while listing.
    }
  }
  return pids
}

export async function startThrowawayCluster (t: Teardown): Promise<ThrowawayCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-cluster-'))
  const { uid, gid } = postgresIds()
  chownSync(dir, uid, gid)
  const dataDir = join(dir, 'data')
  const port = await freePort()
  let frozen = false
  t.teardown(() => {
    for (const pid of clusterPids(dataDir)) {
      try { process.kill(pid, 'SIGCONT') } catch {}
    }
    try {
      asPostgres('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate', '-w'])
    } catch {}
    rmSync(dir, { recursive: true, force: true })
  })
  asPostgres('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'])
  asPostgres('pg_ctl', ['start', '-D', dataDir, '-w', '-l', join(dir, 'log'), '-o',
    `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c max_connections=60`])
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  const admin = async (sql: string): Promise<Array<Record<string, unknown>>> => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      return (await client.query(sql)).rows
    } finally {
      await client.end()
    }
  }
  return {
    url,
    admin,
    async requireMissingStandby (on) {
      await admin(on ? 'ALTER SYSTEM SET synchronous_standby_names = \'missing_standby\'' : 'ALTER SYSTEM RESET synchronous_standby_names')
      await admin('SELECT pg_reload_conf()')
    },
    freeze (on) {
      if (on === frozen) return
      frozen = on
      for (const pid of clusterPids(dataDir)) {
        try { process.kill(pid, on ? 'SIGSTOP' : 'SIGCONT') } catch {}
      }
    }
  }
}
