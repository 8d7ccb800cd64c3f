import { type Test } from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { compose, composeOk, proxyPassedOn, runningIds, shell, storedAfterLoad, type Client, type Project } from './compose-project.js'
import { loadFigures, startCreateLoad, type Answer } from './create-load.js'
import { dockerOk } from './docker.js'

// deploy/rollout.sh in the compose test: a new image deployed to the three
// replicas behind the proxy while creates go through it 8 at a time, the
// whole time. Not one fails (no 5xx, no reset, no refused connection), every
// one acknowledged is stored, every replica runs the new image, their number
// is unchanged, and a plain `up` afterwards recreates none of them.

const CONNECTIONS = 8
const ROLLOUT_MS = 900_000
// Past the script's end, nginx may still hold the last replica's address
// for 2 s and a connect to it time out after 2 s more.
const LOAD_AFTER_MS = 5_000
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`

const imageOf = async (ref: string): Promise<string> => (await dockerOk(['image', 'inspect', '--format', '{{.Id}}', ref])).trim()

async function imagesRunning (ids: string[]): Promise<string[]> {
  return (await dockerOk(['inspect', '--format', '{{.Image}}', ...ids])).split('\n').filter((l) => l !== '')
}

// The script, with the moment each "stopping" line arrived.
async function runRollout (p: Project): Promise<{ code: number, output: string, ms: number, stops: number[] }> {
  const stops: number[] = []
  let partial = ''
  const run = await shell(p, 'deploy/rollout.sh', ROLLOUT_MS, (chunk) => {
    const lines = (partial + chunk).split('\n')
    partial = lines.pop() ?? ''
    for (const line of lines) if (/^rollout: \S+ stopping /.test(line)) stops.push(performance.now())
  })
  return { code: run.code, output: `${run.stdout}${run.stderr}`, ms: run.ms, stops }
}

async function checkLoad (t: Test, p: Project, all: Answer[], rollout: { ms: number, stops: number[], began: number, since: string, replicas: number }): Promise<void> {
  const { byAnswer, acknowledged, stored, lost } = await storedAfterLoad(p, all, 'rollout')
  const failed = all.filter((a) => a.status !== 200)
  const slowest = all.reduce((most, a) => Math.max(most, a.doneAt - a.sentAt), 0)
  const figures = loadFigures(all, rollout.began)
  t.comment(`rollout in ${secs(rollout.ms)} under ${all.length} creates, ${CONNECTIONS} at a time: ${JSON.stringify(byAnswer)}; acknowledged ${acknowledged}, stored ${stored}, lost ${lost.length}; slowest answer ${secs(slowest)}, longest pause in 200s ${secs(figures.firstOkAgainMs - figures.pauseStartMs)}`)
  t.comment(`nginx passed on: ${JSON.stringify(await proxyPassedOn(p, rollout.since))}`)
  const inFlight = rollout.stops.map((at) => all.filter((a) => a.sentAt < at && a.doneAt > at).length)
  t.equal(inFlight.length, rollout.replicas, `${rollout.replicas} old replicas stopped`)
  t.ok(inFlight.every((n) => n > 0), `each under load (creates in flight as its stop began: ${inFlight.join(', ')})`)
  t.same(failed.slice(0, 10), [], `no create failed (${failed.length} of ${all.length})`)
  t.same(lost, [], 'every acknowledged create is stored')
  t.ok(acknowledged > 1000, `creates went on the whole time (${acknowledged})`)
}

async function checkReplicas (t: Test, p: Project, before: { image: string, ids: string[] }): Promise<void> {
  const image = await imageOf(`${p.name}-app`)
  t.not(image, before.image, 'the build made a new image')
  const ids = await runningIds(p, 'app')
  t.equal(ids.length, before.ids.length, `${before.ids.length} replicas, as before`)
  const all = (await composeOk(p, ['ps', '-a', '-q', 'app'])).split('\n').filter((l) => l !== '')
  t.same(all.filter((id) => before.ids.includes(id)), [], 'no old replica is left, stopped or running')
  t.same([...new Set(await imagesRunning(ids))], [image], 'every replica runs the new image')
  const up = await compose(p, ['up', '-d', '--scale', `app=${before.ids.length}`], 180_000)
  t.equal(up.code, 0, `docker compose up -d --scale app=${before.ids.length} afterwards`)
  t.same((await runningIds(p, 'app')).sort(), ids.sort(), 'recreates no replica')
}

export async function rolloutUnderLoad (t: Test, c: Client): Promise<void> {
  const p = c.project
  const before = { image: await imageOf(`${p.name}-app`), ids: await runningIds(p, 'app') }
  // A change in the clone, so the build makes a new image.
  writeFileSync(join(p.dir, 'src', 'rollout-mark.ts'), `export const rolloutMark = '${Date.now()}'\n`)
  const load = startCreateLoad({
    url: `http://127.0.0.1:${p.port}`,
    token: c.token,
    connections: CONNECTIONS,
    firstId: 1_000_000,
    maxCreates: 1_000_000,
    maxMs: ROLLOUT_MS,
    answerTimeoutMs: 60_000,
    tag: 'rollout'
  })
  const warm = performance.now() + 60_000
  while (load.answers.length < 100 && performance.now() < warm) await sleep(50)
  const began = performance.now()
  const since = new Date().toISOString()
  const run = await runRollout(p)
  await sleep(LOAD_AFTER_MS)
  const all = await load.stop()
  t.equal(run.code, 0, `deploy/rollout.sh (${secs(run.ms)})${run.code === 0 ? '' : `\n${run.output.slice(-4000)}`}`)
  t.comment(run.output.split('\n').filter((l) => l.startsWith('rollout:')).join('\n'))
  await checkLoad(t, p, all, { ms: run.ms, stops: run.stops, began, since, replicas: before.ids.length })
  await checkReplicas(t, p, before)
}
