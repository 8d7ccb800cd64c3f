import { type Test } from 'tap'
import { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parse } from 'yaml'
import { composeOk, containers, runningIds, type Project } from './compose-project.js'
import { docker, dockerOk, type Run } from './docker.js'
import { activeAlerts, activeTargets } from './prometheus.js'

// docker-compose.monitoring.yml in the compose test: the alert rules' own
// tests under promtool, Prometheus scraping every replica, and an alert
// pending within two minutes of the database stopping (the contract's bound).

export const MONITORING_FILE = 'docker-compose.monitoring.yml'
const RULES_DIR = 'deploy/prometheus'
const NOT_READY = 'PlantStoreReplicaNotReady'
const PENDING_WITHIN_MS = 120_000
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`

// Polls check() every second until it returns a value; how long that took.
async function pollUntil<T> (what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<{ value: T, ms: number }> {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    const value = await check().catch(() => undefined)
    if (value !== undefined) return { value, ms: performance.now() - started }
    await sleep(1000)
  }
  throw new Error(`not ${what} within ${secs(timeoutMs)}`)
}

// The image the monitoring file runs holds promtool too.
async function promtool (dir: string, rules: string, args: string[]): Promise<Run> {
  const image = (parse(readFileSync(join(dir, MONITORING_FILE), 'utf8')) as { services: { prometheus: { image: string } } }).services.prometheus.image
  return await docker(['run', '--rm', '--network', 'none', '--entrypoint', 'promtool', '-v', `${rules}:/etc/prometheus:ro`, image, ...args], 120_000)
}

export async function ruleTests (t: Test, dir: string): Promise<void> {
  const rules = join(dir, RULES_DIR)
  const output = (run: Run): string => run.code === 0 ? '' : `\n${run.stdout}${run.stderr}`
  const config = await promtool(dir, rules, ['check', 'config', '/etc/prometheus/prometheus.yml'])
  t.equal(config.code, 0, `promtool check config: prometheus.yml and alerts.yml are valid${output(config)}`)
  const tests = await promtool(dir, rules, ['test', 'rules', '/etc/prometheus/alerts.test.yml'])
  t.equal(tests.code, 0, `promtool test rules: each alert fires and stays quiet as alerts.test.yml says${output(tests)}`)
  // The tests can fail: with every `for` gone, alerts fire early.
  const broken = mkdtempSync(join(tmpdir(), 'plant-store-rules-'))
  try {
    cpSync(rules, broken, { recursive: true })
    // Prometheus runs as nobody in the image.
    chmodSync(broken, 0o755)
    const alerts = join(broken, 'alerts.yml')
    writeFileSync(alerts, readFileSync(alerts, 'utf8').replaceAll(/^(\s+)for: \w+$/gm, '$1for: 0s'))
    const run = await promtool(dir, broken, ['test', 'rules', '/etc/prometheus/alerts.test.yml'])
    t.equal(run.code, 1, 'and they fail for rules that do not wait')
  } finally {
    rmSync(broken, { recursive: true, force: true })
  }
}

const prometheusUrl = (p: Project): string => `http://127.0.0.1:${p.prometheusPort ?? 9090}`

// Every running replica's metrics address on the compose network.
async function replicaAddresses (p: Project): Promise<string[]> {
  const out = await dockerOk(['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', ...await runningIds(p, 'app')])
  return out.split('\n').filter((l) => l !== '').map((ip) => `${ip}:9464`).sort()
}

export async function scrapesEveryReplica (t: Test, p: Project): Promise<void> {
  const published = (await containers(p)).find((c) => c.Service === 'prometheus')?.Publishers?.filter((x) => x.PublishedPort !== 0)
  t.same(published?.map((x) => [x.URL, x.PublishedPort]), [['127.0.0.1', p.prometheusPort]], 'Prometheus is published on loopback only')
  const expected = await replicaAddresses(p)
  t.equal(expected.length, 3, 'three replicas')
  const seen = await pollUntil('scraping every replica', 120_000, async () => {
    const up = (await activeTargets(prometheusUrl(p))).filter((x) => x.labels.job === 'plant-store' && x.health === 'up').map((x) => x.labels.instance).sort()
    return JSON.stringify(up) === JSON.stringify(expected) ? up : undefined
  })
  t.same(seen.value, expected, `Prometheus scrapes every replica, found by Docker's DNS (seen after ${secs(seen.ms)})`)
}

// Quiet while the database runs, then pending soon after it stops.
export async function alertWhenDatabaseStops (t: Test, p: Project): Promise<void> {
  const notReady = async (): Promise<string[]> =>
    (await activeAlerts(prometheusUrl(p))).filter((a) => a.labels.alertname === NOT_READY).map((a) => `${a.labels.instance ?? ''} ${a.state}`)
  const quiet = await pollUntil(`quiet (no ${NOT_READY})`, 180_000, async () => (await notReady()).length === 0 ? true : undefined)
  t.pass(`no ${NOT_READY} while the database runs (${secs(quiet.ms)} waited)`)
  const stoppedAt = performance.now()
  await composeOk(p, ['stop', 'db'], 60_000)
  const pending = await pollUntil(`${NOT_READY} pending`, 240_000, async () => {
    const active = await notReady()
    return active.length > 0 ? active : undefined
  })
  const ms = performance.now() - stoppedAt
  t.ok(ms < PENDING_WITHIN_MS, `${NOT_READY} (${pending.value.join(', ')}) ${secs(ms)} after the database stopped: within ${secs(PENDING_WITHIN_MS)}`)
  const all = await activeAlerts(prometheusUrl(p))
  t.comment(`alerts then: ${[...new Set(all.map((a) => `${a.labels.alertname ?? ''} ${a.state}`))].join(', ')}`)
}
