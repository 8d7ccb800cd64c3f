import t from 'tap'
import http from 'node:http'
import { readFileSync } from 'node:fs'
import { forEachBackend, TOKEN } from '../helper.js'
import { root, spawnProcess, type SourceServer } from '../support/processes.js'
import { LIVENESS_LIMIT_MS, livenessBound, startLivenessProbe, worst, type Probe } from '../support/liveness-probe.js'
import { bigCreate, shedUnread, startReadyServer, type Answer } from '../support/big-creates.js'

// Overload sheds before it stalls: bursts of 300 concurrent creates of 1 MB
// each (a body just under BODY_LIMIT) on 2 cores. Past what the service can
// answer in time it answers 503 with Retry-After before reading the body,
// so /health/live keeps answering within the contract's second; nothing
// answered 503 is stored, everything answered 200 is.
const BURSTS = 3
const CREATES = 300
const NAME_BYTES = 1_000_000
const POLL_EVERY_MS = 50
// The contract's figure is 1 s. On a shared 2-core box with many runnable
// processes a process that needs 0.1 s of CPU may wait several times that
// for it, so the bound on the worst probe of every burst is livenessBound's
// (a margin, stretched by the machine's load); a probe of a trivial server
// beside it (the control) shows the machine's own stalls. Reading and parsing every body took the
// probe past 3 s here, on both backends, in every run.
// The server's CPU time for one burst is printed, not bounded: it is a
// speed figure, and a first burst on a cold process went past any bound
// tight enough to mean something. What shedding promises is asserted
// instead: some creates of every burst are refused before their body is read.

// A trivial HTTP server: its probe's latency is the machine's, not the service's.
const CONTROL = "const s = require('node:http').createServer((q, r) => r.end('ok')).listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + s.address().port))"

// User plus system CPU time of a process so far (Linux), in ms.
function cpuMs (pid: number): number {
  const fields = (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 1000 / 100
}

// Whether a create's id is stored, over HTTP on either backend: a small
// create of the same id with another name is a conflict (409) when the
// 1 MB one was stored, and is stored itself (200) when it was not.
async function isStored (url: string, id: number): Promise<boolean> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const status = await new Promise<number>((resolve) => {
      const body = JSON.stringify({ id, name: 'stored?' })
      const req = http.request(`${url}/plants`, {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
      }, (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      })
      req.on('error', () => resolve(0))
      req.end(body)
    })
    if (status === 409) return true
    if (status === 200) return false
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error(`could not tell whether create ${id} is stored`)
}

// Asks each id in turn, a few at a time, so the check itself is no burst.
async function storedOf (url: string, ids: number[]): Promise<number[]> {
  const stored: number[] = []
  let next = 0
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (next < ids.length) {
      const id = ids[next++] as number
      if (await isStored(url, id)) stored.push(id)
    }
  }))
  return stored.sort((a, b) => a - b)
}

interface Burst { answers: Answer[], liveness: Probe[], control: Probe[], cpuMs: number }

async function burst (server: SourceServer, controlUrl: string, firstId: number, creates = CREATES): Promise<Burst> {
  const probe = startLivenessProbe(server.url, POLL_EVERY_MS)
  const controlProbe = startLivenessProbe(controlUrl, POLL_EVERY_MS)
  // Let the probes' processes start before the burst.
  await new Promise((resolve) => setTimeout(resolve, 500))
  const pid = server.child.pid as number
  const cpuBefore = cpuMs(pid)
  const answers = await Promise.all(Array.from({ length: creates }, async (_, i) => await bigCreate(server.url, firstId + i, NAME_BYTES)))
  const cpu = cpuMs(pid) - cpuBefore
  return { answers, liveness: await probe.stop(), control: await controlProbe.stop(), cpuMs: cpu }
}

// Answers by status, 503s by the reason their message gives.
function tally (answers: Answer[]): string {
  const counts = new Map<string, number>()
  for (const a of answers) {
    const key = `${a.status}${a.status === 503 ? ` ${/\((.*)\)/.exec(a.message ?? '')?.[1] ?? 'database'}` : ''}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return [...counts].sort().map(([key, n]) => `${key}: ${n}`).join(', ')
}

forEachBackend(t, `bursts of ${CREATES} concurrent 1 MB creates keep /health/live within ${LIVENESS_LIMIT_MS} ms`, async (t, backend) => {
  const server = await startReadyServer(t, backend)
  const control = spawnProcess(t, ['node', '-e', CONTROL], root, {})
  const controlUrl = await new Promise<string>((resolve) => control.child.stdout?.once('data', (d: Buffer) => resolve(d.toString().trim())))

  // A small burst first, so the bursts measured meet code already compiled.
  await burst(server, controlUrl, -100, 20)
  const bursts: Burst[] = []
  for (let b = 0; b < BURSTS; b++) {
    const result = await burst(server, controlUrl, 1 + b * CREATES)
    t.comment(`burst ${b + 1}: creates ${tally(result.answers)}; server CPU ${Math.round(result.cpuMs)} ms; ` +
      `/health/live polled ${result.liveness.length} times, worst ${worst(result.liveness)} ms; control worst ${worst(result.control)} ms`)
    bursts.push(result)
  }
  const answers = bursts.flatMap((b) => b.answers)
  const liveness = bursts.flatMap((b) => b.liveness)
  const ok = answers.filter((a) => a.status === 200).map((a) => a.id).sort((a, b) => a - b)
  const shed = answers.filter((a) => a.status === 503)
  const storedOk = await storedOf(server.url, ok)
  const storedShed = await storedOf(server.url, shed.map((a) => a.id))
  t.comment(`all bursts: creates ${tally(answers)}; worst /health/live ${worst(liveness)} ms; ` +
    `200 stored: ${storedOk.length} of ${ok.length}; 503 stored: ${storedShed.length} of ${shed.length}`)

  t.ok(bursts.every((b) => b.liveness.length >= 1), 'liveness was polled during every burst')
  t.same(liveness.filter((l) => l.status !== 200), [], 'every liveness answer is 200')
  const bound = livenessBound()
  t.ok(worst(liveness) <= bound.ms, `every liveness answer within ${bound.why} (worst ${worst(liveness)} ms)`)
  t.ok(bursts.every((b) => b.answers.some(shedUnread)), 'every burst sheds some creates before reading their bodies')
  t.same(answers.filter((a) => ![200, 503, 0].includes(a.status)).map((a) => a.status), [], 'every create is answered 200 or 503 (or its connection lost)')
  t.ok(bursts.every((b) => b.answers.some((a) => a.status === 200)), 'every burst stores some creates')
  t.same(shed.filter((a) => a.retryAfter === undefined || !/^\d+$/.test(a.retryAfter)).map((a) => a.id), [], 'every 503 carries Retry-After')
  t.same(storedShed, [], 'no create answered 503 is stored')
  t.same(storedOk, ok, 'every create answered 200 is stored')
})
