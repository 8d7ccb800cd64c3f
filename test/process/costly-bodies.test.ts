import t from 'tap'
import { forEachBackend } from '../helper.js'
import { LIVENESS_LIMIT_MS, livenessBound, startLivenessProbe, worst } from '../support/liveness-probe.js'
import { type Answer, sendCreate, startReadyServer, tally } from '../support/big-creates.js'

// /health/live stays within its second under 100 creates at once of any valid
// 1 MB body, the ones that cost the most to read included: an array of
// small numbers (the most values a megabyte holds) and escaped keys (read by
// the reader's second path, as the runtime's JSON.parse may misread them).
const CREATES = 100
const BODY_LIMIT = 1_048_576
const POLL_EVERY_MS = 50

// {"id":…,"name":"x","x":[1,1,…]}, BODY_LIMIT bytes at most.
function numbers (id: number): Buffer {
  const head = `{"id":${id},"name":"x","x":[`
  return Buffer.from(head + '1,'.repeat(Math.floor((BODY_LIMIT - head.length - 3) / 2)) + '1]}')
}

// {"id":…,"name":"x","\u00610":1,"\u00611":1,…}: every other key written with an escape.
function escapedKeys (id: number): Buffer {
  const parts = [`{"id":${id},"name":"x"`]
  let length = (parts[0] as string).length + 1
  for (let i = 0; ; i++) {
    const member = `,"\\u0061${i}":1`
    if (length + member.length > BODY_LIMIT) break
    parts.push(member)
    length += member.length
  }
  parts.push('}')
  return Buffer.from(parts.join(''))
}

for (const [kind, body] of [['small numbers', numbers], ['escaped keys', escapedKeys]] as const) {
  forEachBackend(t, `${CREATES} creates at once of 1 MB of ${kind} keep /health/live within ${LIVENESS_LIMIT_MS} ms`, async (t, backend) => {
    const server = await startReadyServer(t, backend)
    const bodies = Array.from({ length: CREATES }, (_, i) => body(i + 1))
    // A few first, so the burst measured meets code already compiled.
    await Promise.all(Array.from({ length: 4 }, async (_, i) => await sendCreate(server.url, -1 - i, [body(-1 - i)])))

    const probe = startLivenessProbe(server.url, POLL_EVERY_MS)
    await new Promise((resolve) => setTimeout(resolve, 500))
    const answers: Answer[] = await Promise.all(bodies.map(async (b, i) => await sendCreate(server.url, i + 1, [b])))
    const liveness = await probe.stop()
    t.comment(`${kind}: ${bodies[0]?.length ?? 0} bytes each; creates ${tally(answers)}; ` +
      `/health/live polled ${liveness.length} times, worst ${worst(liveness)} ms`)

    t.ok(liveness.length >= 1, 'liveness was polled during the burst (a probe 3 s late on a loaded machine answers twice)')
    t.same(liveness.filter((l) => l.status !== 200), [], 'every liveness answer is 200')
    const bound = livenessBound()
    t.ok(worst(liveness) <= bound.ms, `every liveness answer within ${bound.why} (worst ${worst(liveness)} ms)`)
    t.same(answers.filter((a) => ![200, 503, 0].includes(a.status)).map((a) => `${a.status} ${a.message ?? ''}`), [], 'every create is answered 200 or 503 (or its connection lost): each body is valid')
    t.ok(answers.some((a) => a.status === 200), 'some are stored')
  })
}
