import { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { migrationVersions } from './postgres.js'
import { jsonLines } from './processes.js'
import {
  accessLines, compose, containers, create, proxyPassedOn, runningIds, sql, storedAfterLoad, waitHealthy, type AccessLine, type Client, type Project
} from './compose-project.js'
import { alertWhenDatabaseStops, scrapesEveryReplica } from './compose-monitoring.js'
import { rolloutUnderLoad } from './compose-rollout.js'
import { startCreateLoad } from './create-load.js'
import { docker, dockerOk } from './docker.js'

// Three replicas behind nginx and Prometheus, started by the README's scale
// command: the proxy spreads creates over all of them, a race on one id
// through it stores one plant, the migrations run once, Prometheus scrapes
// every replica, deploy/rollout.sh replaces them under load with no failed
// request, a replica stopped under load loses no acknowledged create (the
// proxy passes what it could not answer to another), and an alert is pending
// soon after the database stops.

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`
const SPREAD = 60
const RACE_IDS = 20
const LOAD = { creates: 400, connections: 8, stopAfter: 100 }

async function replicaLogs (p: Project): Promise<Map<string, string>> {
  const logs = new Map<string, string>()
  for (const id of await runningIds(p, 'app')) logs.set(id, (await dockerOk(['logs', id])))
  return logs
}

const linesOf = (logs: Map<string, string>, prefix: string): AccessLine[][] =>
  [...logs.values()].map((log) => accessLines(log).filter((l) => l.reqId.startsWith(prefix)))

async function spread (t: Test, c: Client): Promise<void> {
  for (let i = 0; i < SPREAD; i++) {
    const answer = await create(c, `spread-${i}`, { id: 1000 + i, name: `spread-${i}` })
    if (answer.status !== 200) t.fail(`spread-${i}: ${answer.status} ${answer.body}`)
  }
  const perReplica = linesOf(await replicaLogs(c.project), 'spread-').map((lines) => lines.length)
  t.comment(`${SPREAD} creates through the proxy, per replica: ${perReplica.join(', ')}`)
  t.equal(perReplica.length, 3, 'three replicas')
  t.ok(perReplica.every((n) => n > 0), `every replica answered some (${perReplica.join(', ')})`)
  t.equal(perReplica.reduce((a, b) => a + b, 0), SPREAD, 'each create answered once')
}

// Four creates of each id at once: two of one plant, two of others.
async function race (t: Test, c: Client): Promise<void> {
  const bodies = (id: number): Array<{ id: number, name: string }> =>
    [{ id, name: 'same' }, { id, name: 'same' }, { id, name: 'other-a' }, { id, name: 'other-b' }]
  const answers = await Promise.all(Array.from({ length: RACE_IDS }, async (_, i) => {
    const id = 2000 + i
    return await Promise.all(bodies(id).map(async (body, k) => ({ body, status: (await create(c, `race-${id}-${k}`, body)).status })))
  }))
  const rows = new Map((await sql(c.project, 'SELECT id, name FROM plants WHERE id >= 2000 AND id < 3000')).map((r) => r.split('|') as [string, string]))
  t.equal(rows.size, RACE_IDS, `${RACE_IDS} ids raced by 4 creates each: ${RACE_IDS} rows`)
  const wrong = answers.flatMap((group) => group.filter((a) => a.status !== (rows.get(String(a.body.id)) === a.body.name ? 200 : 409)))
  t.same(wrong, [], 'the stored plant\'s creates answered 200 (created or replayed), the others 409')
  const created = linesOf(await replicaLogs(c.project), 'race-').flat().filter((l) => l.outcome === 'created')
  t.equal(created.length, RACE_IDS, 'one create per id was logged as created')
}

async function migratedOnce (t: Test, p: Project): Promise<void> {
  const msgs = [...(await replicaLogs(p)).values()].flatMap((log) => jsonLines(log).lines.map((l) => l.msg))
  t.equal(msgs.filter((m) => m === 'migrations applied').length, 1, 'one replica applied the migrations')
  t.equal(msgs.filter((m) => m === 'schema up to date').length, 2, 'the other two found the schema')
  const versions = (await sql(p, 'SELECT version FROM schemaversion WHERE version <> 0 ORDER BY version')).map(Number)
  t.same(versions, migrationVersions(), 'each migration recorded once')
}

// The load through the proxy; one replica gets `docker stop` once a quarter is answered.
async function stopUnderLoad (t: Test, c: Client): Promise<void> {
  const since = new Date().toISOString()
  const load = startCreateLoad({
    url: `http://127.0.0.1:${c.project.port}`,
    token: c.token,
    connections: LOAD.connections,
    firstId: 100_000,
    maxCreates: LOAD.creates,
    maxMs: 180_000,
    answerTimeoutMs: 60_000,
    tag: 'stop'
  })
  const waitFor = async (n: number): Promise<void> => {
    const until = performance.now() + 180_000
    while (load.answers.length < n && performance.now() < until) await sleep(50)
  }
  // The victim is chosen before the wait, so the stop follows it at once.
  const victim = (await runningIds(c.project, 'app'))[0] as string
  await waitFor(LOAD.stopAfter)
  const stopBegan = performance.now()
  const stop = await docker(['stop', victim], 60_000)
  const answeredAtStop = load.answers.length
  await waitFor(LOAD.creates)
  const all = await load.stop()
  const exit = JSON.parse(await dockerOk(['inspect', '--format', '{{json .State.ExitCode}}', victim])) as number
  t.equal(exit, 0, `the stopped replica exited 0 (docker stop: ${secs(stop.ms)})`)
  // Under load is creates in flight as the stop began. Counting the answers
  // once docker stop returned raced the stop's length against the load's
  // speed: a fast load could answer all of them first.
  const inFlightAtStop = all.filter((a) => a.sentAt < stopBegan && a.doneAt > stopBegan).length
  t.ok(inFlightAtStop > 0, `stopped under load (${inFlightAtStop} creates in flight as it began; ${answeredAtStop} of ${LOAD.creates} answered once it returned)`)

  const { byAnswer, acknowledged, stored, lost } = await storedAfterLoad(c.project, all, 'stop')
  t.comment(`stopped replica under ${LOAD.creates} creates, ${LOAD.connections} at a time: ${JSON.stringify(byAnswer)}; acknowledged ${acknowledged}, stored ${stored}, lost ${lost.length}`)
  t.comment(`nginx passed on: ${JSON.stringify(await proxyPassedOn(c.project, since))}`)
  t.equal(all.length, LOAD.creates, 'every create was sent and answered or failed')
  t.same(lost, [], 'no acknowledged create is lost')
  t.ok(acknowledged > 0, 'creates were acknowledged')
}

export async function scaleTests (t: Test, p: Project): Promise<void> {
  const token = readFileSync(join(p.dir, 'secrets', 'api_tokens.txt'), 'utf8').split('\n').find((l) => l !== '' && !l.startsWith('#')) as string
  const readme = readFileSync(join(p.dir, 'README.md'), 'utf8')
  const command = 'docker compose -f docker-compose.yml -f docker-compose.scale.yml up -d --build --scale app=3'
  t.ok(readme.includes(command), 'the README gives the scale command')
  const up = await compose(p, ['up', '-d', '--build', '--scale', 'app=3'], 600_000)
  t.equal(up.code, 0, `up --scale app=3 (${secs(up.ms)})${up.code === 0 ? '' : `\n${up.stderr.slice(-4000)}`}`)
  t.pass(`three replicas healthy, the proxy and Prometheus running ${secs(await waitHealthy(p, { app: 3, db: 1, proxy: 1, prometheus: 1 }))} later`)
  t.notOk((await containers(p)).some((c) => c.Service === 'app' && (c.Publishers ?? []).some((x) => x.PublishedPort !== 0)), 'no replica publishes a port')

  const c: Client = { project: p, token, sent: [] }
  await migratedOnce(t, p)
  await spread(t, c)
  await race(t, c)
  await scrapesEveryReplica(t, p)
  await rolloutUnderLoad(t, c)
  await stopUnderLoad(t, c)
  await alertWhenDatabaseStops(t, p)
  const down = await compose(p, ['down', '-v'], 60_000)
  t.equal(down.code, 0, `down -v (${secs(down.ms)})`)
}
