import t from 'tap'
import { forEachBackend } from '../helper.js'
import { livenessBound, startLivenessProbe, worst } from '../support/liveness-probe.js'
import { type Answer, sendCreate, startReadyServer } from '../support/big-creates.js'

// A valid create whose keys send the JSON reader down its escaped-key path
// costs time in proportion to its size, never its square: one at a time, every
// size up to the limit, the worst shapes we know of, and /health/live keeps
// answering within its second the whole time.
const BODY_LIMIT = 1_048_576
const SIZES = [1024, 16 * 1024, 64 * 1024, 256 * 1024, BODY_LIMIT - 64]
const POLL_EVERY_MS = 50
// A create that takes longer than this has failed already; the bound keeps a
// broken reader from holding the test for minutes.
const CREATE_TIMEOUT_MS = 20_000

// Each shape is a valid NewPlant of about `size` bytes. The key "\"" cannot be
// written without an escape, so the reader has to rename it around the parse.
const shapes: Record<string, (id: number, size: number) => string> = {
  // One long key of '@' characters beside it.
  'one long @ key': (id, size) => {
    const head = `{"id":${id},"name":"a","\\"":1,"`
    return head + '@'.repeat(size - head.length - 4) + '":1}'
  },
  // Keys of one, two, three … '@' characters: many keys, each longer.
  'a staircase of @ keys': (id, size) => {
    let body = `{"id":${id},"name":"a","\\"":1`
    for (let n = 1; body.length + n + 6 < size; n++) body += `,"${'@'.repeat(n)}":1`
    return body + '}'
  },
  // As many keys as fit that each need renaming.
  'many keys with a quote': (id, size) => {
    let body = `{"id":${id},"name":"a"`
    for (let n = 0; body.length + 16 < size; n++) body += `,"\\"${n}":1`
    return body + '}'
  }
}

forEachBackend(t, 'valid creates with escaped keys of every size keep /health/live within its second', async (t, backend) => {
  const server = await startReadyServer(t, backend)

  let id = 1
  for (const [shape, build] of Object.entries(shapes)) {
    const probe = startLivenessProbe(server.url, POLL_EVERY_MS)
    await new Promise((resolve) => setTimeout(resolve, 500)) // the probe's process starts
    const answers: Array<Answer & { bytes: number }> = []
    for (const size of SIZES) {
      const body = Buffer.from(build(id, size))
      answers.push({ ...await sendCreate(server.url, id++, [body], CREATE_TIMEOUT_MS), bytes: body.length })
    }
    const liveness = await probe.stop()
    t.comment(`${shape}: ${answers.map((a) => `${a.bytes} B ${a.status} in ${Math.round(a.ms)} ms`).join(', ')}; ` +
      `/health/live polled ${liveness.length} times, worst ${worst(liveness)} ms`)
    t.same(answers.filter((a) => a.status !== 200).map((a) => `${a.bytes} B: ${a.status} ${a.message ?? ''}`), [],
      `${shape}: every body is valid and answered 200`)
    // A body that held the loop past the bound would hold every other caller too,
    // whether or not a poll happened to fall in it.
    const bound = livenessBound()
    t.same(answers.filter((a) => a.ms > bound.ms).map((a) => `${a.bytes} B in ${Math.round(a.ms)} ms`), [],
      `${shape}: every create answered within ${bound.why}`)
    t.ok(liveness.length >= 1, `${shape}: liveness was polled`)
    t.same(liveness.filter((l) => l.status !== 200), [], `${shape}: every liveness answer is 200`)
    t.ok(worst(liveness) <= bound.ms, `${shape}: every liveness answer within ${bound.why} (worst ${worst(liveness)} ms)`)
  }
})
