// A PostgreSQL HA cluster on loopback ports for `npm run test:failover`:
// one etcd, two PostgreSQL 15 nodes managed by Patroni in synchronous_mode,
// and HAProxy sending clients to whichever node Patroni's REST API calls the
// primary. Debian's packages; the nodes run as the `postgres` user (initdb
// refuses root) from /usr/lib/postgresql/15/bin, never touching the server
// on 5432. Everything a run starts has its run directory in its command
// line (or is a child of such a process), so teardown, and the next run
// after a killed one, find exactly its processes.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { appendFileSync, chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { freePort } from './processes.js'

export const PG_BIN = '/usr/lib/postgresql/15/bin'
const PACKAGES = ['patroni', 'etcd-server', 'etcd-client', 'haproxy', 'python3-etcd', 'python3-psycopg2']
const COMMANDS = ['/usr/bin/patroni', '/usr/bin/patronictl', '/usr/bin/etcd', '/usr/sbin/haproxy', `${PG_BIN}/postgres`]
const RUN_PREFIX = 'plant-store-ha-'
// Patroni's timing: the leader key lives TTL seconds (a lost primary is
// replaced about that long after it stops renewing it); loop_wait +
// 2 × retry_timeout must fit in it.
const DCS = { ttl: 10, loop_wait: 2, retry_timeout: 3 }

export type Readiness = { ok: true } | { ok: false, reason: string }

// Root, the packages, PostgreSQL 15 and the postgres user, installing the
// packages when they are missing; otherwise why not.
export function haPrerequisites (): Readiness {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'needs root (apt-get, and running the nodes as the postgres user)' }
  if (!existsSync(`${PG_BIN}/initdb`)) return { ok: false, reason: `no PostgreSQL 15 binaries in ${PG_BIN}` }
  if (COMMANDS.some((c) => !existsSync(c))) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
    const update = spawnSync('apt-get', ['update'], { env, encoding: 'utf8', timeout: 300_000 })
    const install = update.status === 0
      ? spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...PACKAGES], { env, encoding: 'utf8', timeout: 600_000 })
      : update
    if (install.status !== 0) return { ok: false, reason: `apt-get could not install ${PACKAGES.join(' ')}: ${(install.stderr ?? '').trim().split('\n').slice(-2).join(' ')}` }
    const missing = COMMANDS.filter((c) => !existsSync(c))
    if (missing.length > 0) return { ok: false, reason: `still missing after apt-get: ${missing.join(' ')}` }
  }
  if (postgresUser() === undefined) return { ok: false, reason: 'no postgres user' }
  return { ok: true }
}

function postgresUser (): { uid: number, gid: number } | undefined {
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'))
  if (line === undefined) return undefined
  const [, , uid, gid] = line.split(':')
  return { uid: Number(uid), gid: Number(gid) }
}

// ---- processes of a run, found by their run directory ----

interface ProcInfo { pid: number, ppid: number, cmdline: string }

function processes (): ProcInfo[] {
  const out: ProcInfo[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ')
      out.push({ pid: Number(entry), ppid, cmdline })
    } catch {
      // Gone while listing.
    }
  }
  return out
}

// The processes whose command line names dir, those adopted into the run
// (the service under test, whose command line does not name it), and all
// their descendants (PostgreSQL's children rename themselves).
function runProcesses (dir: string): ProcInfo[] {
  const all = processes()
  const adopted = adoptedProcesses(dir)
  const found = new Map<number, ProcInfo>()
  for (const p of all) {
    if (p.pid === process.pid) continue
    if (p.cmdline.includes(dir) || adopted.some((a) => a.pid === p.pid && p.cmdline.includes(a.command))) found.set(p.pid, p)
  }
  for (let grew = true; grew;) {
    grew = false
    for (const p of all) {
      if (!found.has(p.pid) && found.has(p.ppid)) { found.set(p.pid, p); grew = true }
    }
  }
  return [...found.values()]
}

// CPU seconds (user + system) of a process, with its reaped children's when
// asked; 0 once it is gone. Fields 14–17 of /proc/PID/stat, in ticks.
export function cpuSeconds (pid: number, withReapedChildren: boolean): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
    const ticks = (f[11] ?? 0) + (f[12] ?? 0) + (withReapedChildren ? (f[13] ?? 0) + (f[14] ?? 0) : 0)
    return ticks / 100
  } catch {
    return 0
  }
}

const ADOPTED = 'adopted.json'

function adoptedProcesses (dir: string): Array<{ pid: number, command: string }> {
  try {
    return JSON.parse(readFileSync(join(dir, ADOPTED), 'utf8')) as Array<{ pid: number, command: string }>
  } catch {
    return []
  }
}

// Counts a process as part of the run (while its command line still holds
// command, so a reused pid is never taken for it): a killed run's next one
// ends it too.
export function adoptProcess (dir: string, pid: number, command: string): void {
  writeFileSync(join(dir, ADOPTED), JSON.stringify([...adoptedProcesses(dir), { pid, command }]))
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const signal = (pid: number, sig: NodeJS.Signals): void => {
  try {
    process.kill(pid, sig)
  } catch {}
}

// A postmaster killed with -9 (the node-loss fault) leaves its small System
// V segment behind. Its pid file names it (line 1: pid; line 7: key, id);
// it is removed only if that postmaster created it and nothing is attached.
function removeOrphanSegment (pidFile: string): void {
  if (!existsSync(pidFile)) return
  const lines = readFileSync(pidFile, 'utf8').split('\n')
  const pid = lines[0]?.trim()
  const shmid = lines[6]?.trim().split(/\s+/)[1]
  if (pid === undefined || shmid === undefined) return
  // /proc/sysvipc/shm: key shmid perms size cpid lpid nattch …
  const segment = readFileSync('/proc/sysvipc/shm', 'utf8').split('\n').slice(1)
    .map((l) => l.trim().split(/\s+/)).find((f) => f[1] === shmid)
  if (segment !== undefined && segment[4] === pid && segment[6] === '0') spawnSync('ipcrm', ['-m', shmid], { stdio: 'ignore' })
}

// Ends every process of a run and removes its directory. Patroni first (it
// would restart PostgreSQL), then an immediate shutdown of each postmaster
// (it removes its shared memory), then anything left.
export async function removeRun (dir: string): Promise<void> {
  for (const p of runProcesses(dir)) if (/patroni|haproxy|etcd/.test(p.cmdline)) signal(p.pid, 'SIGKILL')
  const postmasters: number[] = []
  for (const node of ['node1', 'node2']) {
    const pidFile = join(dir, node, 'data', 'postmaster.pid')
    if (!existsSync(pidFile)) continue
    const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0])
    if (pid > 0 && runProcesses(dir).some((p) => p.pid === pid)) {
      signal(pid, 'SIGQUIT')
      postmasters.push(pid)
    }
  }
  for (let i = 0; i < 50 && postmasters.some(alive); i++) await sleep(100)
  for (let i = 0; i < 20; i++) {
    const left = runProcesses(dir)
    if (left.length === 0) break
    for (const p of left) signal(p.pid, 'SIGKILL')
    await sleep(100)
  }
  for (const node of ['node1', 'node2']) removeOrphanSegment(join(dir, node, 'data', 'postmaster.pid'))
  rmSync(dir, { recursive: true, force: true })
}

// Runs whose test process is gone (killed mid-run) are removed, and with
// own, this process's runs too.
export async function removeLeftoverRuns (own = false): Promise<string[]> {
  const removed: string[] = []
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(RUN_PREFIX)) continue
    const dir = join(tmpdir(), name)
    let owner = 0
    try {
      owner = Number(readFileSync(join(dir, 'owner.pid'), 'utf8').trim())
    } catch {}
    if (owner > 0 && alive(owner) && !(own && owner === process.pid)) continue
    await removeRun(dir)
    removed.push(dir)
  }
  return removed
}

// ---- the cluster ----

export interface Node {
  name: string
  pgPort: number
  restPort: number
  dataDir: string
  patroni?: ChildProcess
}

export interface HaCluster {
  dir: string
  scope: string
  etcdPort: number
  proxyPort: number
  nodes: Node[]
  // postgres://… through HAProxy: the one address the service gets.
  proxyUrl: string
  nodeUrl(node: Node): string
  // What Patroni's REST API says about the cluster.
  members(): Promise<Member[]>
  // A node's Patroni configuration file.
  configPath(node: Node): string
  // patronictl with this cluster's configuration (not blocking the load).
  patronictl(args: string[]): Promise<{ status: number | null, stdout: string, stderr: string }>
  // The pids of a node's Patroni and PostgreSQL postmaster.
  pids(node: Node): { patroni?: number, postgres?: number }
  // CPU seconds a node's PostgreSQL has used so far: the postmaster, its
  // live children and those it has reaped.
  postgresCpuSeconds(node: Node): number
  log(): string
}

export interface Member { name: string, role: string, state: string, lag?: number | string }

function patroniConfig (c: { scope: string, dir: string, etcdPort: number }, node: Node): string {
  // JSON is YAML: no YAML writer needed.
  return JSON.stringify({
    scope: c.scope,
    namespace: '/plant-store-test/',
    name: node.name,
    log: { level: 'INFO' },
    restapi: { listen: `127.0.0.1:${node.restPort}`, connect_address: `127.0.0.1:${node.restPort}` },
    etcd3: { hosts: [`127.0.0.1:${c.etcdPort}`] },
    bootstrap: {
      dcs: {
        ...DCS,
        maximum_lag_on_failover: 1048576,
        synchronous_mode: true,
        postgresql: {
          use_pg_rewind: true,
          parameters: { wal_level: 'replica', hot_standby: 'on', max_wal_senders: 5, max_replication_slots: 5, wal_log_hints: 'on', max_connections: 100 }
        }
      },
      initdb: [{ encoding: 'UTF8' }, { 'auth-local': 'trust' }, { 'auth-host': 'trust' }]
    },
    postgresql: {
      listen: `127.0.0.1:${node.pgPort}`,
      connect_address: `127.0.0.1:${node.pgPort}`,
      data_dir: node.dataDir,
      bin_dir: PG_BIN,
      pgpass: join(c.dir, node.name, 'pgpass'),
      authentication: {
        superuser: { username: 'postgres', password: 'ha-test' },
        replication: { username: 'replicator', password: 'ha-test' }
      },
      pg_hba: ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication replicator 127.0.0.1/32 trust'],
      parameters: { unix_socket_directories: join(c.dir, node.name) }
    },
    tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false }
  }, null, 2)
}

function haproxyConfig (proxyPort: number, nodes: Node[]): string {
  return [
    'global',
    '  maxconn 400',
    'defaults',
    '  mode tcp',
    '  timeout connect 2s',
    '  timeout client 30m',
    '  timeout server 30m',
    '  timeout check 1s',
    'listen primary',
    `  bind 127.0.0.1:${proxyPort}`,
    '  option httpchk GET /primary',
    '  http-check expect status 200',
    '  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions',
    ...nodes.map((n) => `  server ${n.name} 127.0.0.1:${n.pgPort} maxconn 100 check port ${n.restPort}`),
    ''
  ].join('\n')
}

async function waitUntil (what: string, limitMs: number, check: () => Promise<boolean> | boolean): Promise<number> {
  const start = performance.now()
  while (performance.now() - start < limitMs) {
    if (await check()) return performance.now() - start
    await sleep(250)
  }
  throw new Error(`${what}: not within ${limitMs} ms`)
}

export async function fetchJson (url: string): Promise<{ status: number, body: unknown }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) })
    return { status: res.status, body: await res.json().catch(() => undefined) }
  } catch {
    return { status: 0, body: undefined }
  }
}

// Spawns the run's processes (as postgres when asked), their output kept
// for a failure's message and in the run directory's run.log.
function processRunner (dir: string, user: { uid: number, gid: number }): { run: (argv: string[], asPostgres?: boolean) => ChildProcess, output: () => string } {
  let output = ''
  const run = (argv: string[], asPostgres = false): ChildProcess => {
    const child = spawn(argv[0] as string, argv.slice(1), {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '', LANG: 'C.UTF-8', HOME: dir },
      ...(asPostgres ? { uid: user.uid, gid: user.gid } : {})
    })
    const name = argv[0]?.split('/').pop() ?? ''
    const keep = (d: Buffer): void => {
      const text = d.toString().replace(/^(?=.)/gm, `${name}: `)
      output = (output + text).slice(-200_000)
      try {
        appendFileSync(join(dir, 'run.log'), text)
      } catch {}
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    return child
  }
  return { run, output: () => output }
}

// n distinct free loopback ports.
async function freePorts (n: number): Promise<number[]> {
  const ports: number[] = []
  while (ports.length < n) {
    const port = await freePort()
    if (!ports.includes(port)) ports.push(port)
  }
  return ports
}

// Builds and starts the cluster; removeLeftoverRuns(true) removes it, also
// after a failed start (whose error ends with the processes' output).
export async function startHaCluster (): Promise<HaCluster> {
  const user = postgresUser() as { uid: number, gid: number }
  const dir = mkdtempSync(join(tmpdir(), RUN_PREFIX))
  // mkdtemp makes it 0700: the nodes, run as postgres, must reach their directories.
  chmodSync(dir, 0o755)
  writeFileSync(join(dir, 'owner.pid'), String(process.pid))
  const [etcdPort, etcdPeer, proxyPort, ...nodePorts] = await freePorts(7) as [number, number, number, ...number[]]
  const nodes: Node[] = ['node1', 'node2'].map((name, i) => ({
    name, pgPort: nodePorts[2 * i] as number, restPort: nodePorts[2 * i + 1] as number, dataDir: join(dir, name, 'data')
  }))
  const { run, output } = processRunner(dir, user)
  const cluster = clusterHandle(dir, etcdPort, proxyPort, nodes, output)
  try {
    mkdirSync(join(dir, 'etcd'))
    run(['/usr/bin/etcd', '--name', 'etcd1', '--data-dir', join(dir, 'etcd', 'data'),
      '--listen-client-urls', `http://127.0.0.1:${etcdPort}`, '--advertise-client-urls', `http://127.0.0.1:${etcdPort}`,
      '--listen-peer-urls', `http://127.0.0.1:${etcdPeer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${etcdPeer}`,
      '--initial-cluster', `etcd1=http://127.0.0.1:${etcdPeer}`, '--initial-cluster-state', 'new', '--enable-v2=true'])
    await waitUntil('etcd healthy', 30_000, async () => (await fetchJson(`http://127.0.0.1:${etcdPort}/health`)).status === 200)
    for (const n of nodes) {
      mkdirSync(join(dir, n.name), { recursive: true })
      chownSync(join(dir, n.name), user.uid, user.gid)
      writeFileSync(cluster.configPath(n), patroniConfig({ scope: cluster.scope, dir, etcdPort }, n))
      chownSync(cluster.configPath(n), user.uid, user.gid)
    }
    const startNode = (n: Node): void => { n.patroni = run(['/usr/bin/patroni', cluster.configPath(n)], true) }
    // The first node bootstraps alone, so it is the first primary.
    startNode(nodes[0] as Node)
    await waitUntil('node1 primary', 90_000, async () => (await fetchJson(`http://127.0.0.1:${nodes[0]?.restPort}/primary`)).status === 200)
    startNode(nodes[1] as Node)
    writeFileSync(join(dir, 'haproxy.cfg'), haproxyConfig(proxyPort, nodes))
    run(['/usr/sbin/haproxy', '-db', '-f', join(dir, 'haproxy.cfg')])
    await waitUntil('a synchronous standby', 120_000, async () => await syncStandby(cluster) !== undefined)
    await waitUntil('HAProxy routing to the primary', 30_000, async () => await primaryBehindProxy(cluster) !== undefined)
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- the cluster's output, last lines:\n${output().split('\n').slice(-60).join('\n')}`)
  }
  return cluster
}

function clusterHandle (dir: string, etcdPort: number, proxyPort: number, nodes: Node[], output: () => string): HaCluster {
  const configPath = (n: Node): string => join(dir, n.name, 'patroni.yml')
  const pids = (n: Node): { patroni?: number, postgres?: number } => {
    const pidFile = join(n.dataDir, 'postmaster.pid')
    const postgres = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : undefined
    return { patroni: n.patroni?.pid, postgres: postgres !== undefined && alive(postgres) ? postgres : undefined }
  }
  return {
    dir,
    scope: `plantstore-${dir.slice(-6).toLowerCase()}`,
    etcdPort,
    proxyPort,
    nodes,
    configPath,
    proxyUrl: `postgres://postgres:ha-test@127.0.0.1:${proxyPort}/postgres`,
    nodeUrl: (n) => `postgres://postgres:ha-test@127.0.0.1:${n.pgPort}/postgres`,
    async members () {
      for (const n of nodes) {
        const { status, body } = await fetchJson(`http://127.0.0.1:${n.restPort}/cluster`)
        if (status === 200) return (body as { members: Member[] }).members
      }
      return []
    },
    patronictl: async (args) => await new Promise((resolve) => {
      execFile('/usr/bin/patronictl', ['-c', configPath(nodes[0] as Node), ...args],
        { encoding: 'utf8', timeout: 120_000, env: { PATH: process.env.PATH ?? '', LANG: 'C.UTF-8', HOME: dir } },
        (err, stdout, stderr) => resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr }))
    }),
    pids,
    postgresCpuSeconds: (n) => {
      const pm = pids(n).postgres
      if (pm === undefined) return 0
      return cpuSeconds(pm, true) + processes().filter((p) => p.ppid === pm).reduce((sum, p) => sum + cpuSeconds(p.pid, false), 0)
    },
    log: output
  }
}

// The member Patroni calls the synchronous standby, streaming.
export async function syncStandby (cluster: HaCluster): Promise<Member | undefined> {
  return (await cluster.members()).find((m) => m.role === 'sync_standby' && (m.state === 'streaming' || m.state === 'running'))
}

export async function leader (cluster: HaCluster): Promise<Node | undefined> {
  const name = (await cluster.members()).find((m) => m.role === 'leader' && m.state === 'running')?.name
  return cluster.nodes.find((n) => n.name === name)
}

// The port of the server HAProxy sends a new connection to, if it is a
// writable primary.
export async function primaryBehindProxy (cluster: HaCluster): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: cluster.proxyUrl, connectionTimeoutMillis: 2000 })
  try {
    await client.connect()
    const { rows } = await client.query<{ recovery: boolean, port: number }>(
      "SELECT pg_is_in_recovery() AS recovery, current_setting('port')::int AS port")
    return rows[0]?.recovery === false ? rows[0].port : undefined
  } catch {
    return undefined
  } finally {
    await client.end().catch(() => {})
  }
}
