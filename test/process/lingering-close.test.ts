import t from 'tap'
import net from 'node:net'
import { LINGER_MS } from '../../plugins/connection-rules.js'
import { forEachBackend, listeningStubApp, listeningTestApp, TOKEN } from '../helper.js'
import { answeredStatuses, parseAnswers } from '../support/http.js'
import { sleep } from '../support/postgres.js'

// A lingering close: when the service answers while the client is still
// sending (an answer given before the body is read, or Connection: close
// with more behind it), the client gets the whole answer and then the
// server's FIN, never a reset. The client here sends its body in chunks
// until it sees the FIN (as a client that reads its answer does), then
// closes its side; any ECONNRESET or EPIPE on the way counts as a reset.
const TRIALS = 20
const BODY_BYTES = 2 * 1024 * 1024
const CHUNK = Buffer.alloc(16 * 1024, 'a')
const LIMIT_MS = 10_000

interface Trial { response: string, ended: boolean, errors: string[] }

async function sendingExchange (port: number, head: string): Promise<Trial> {
  const socket = net.connect({ host: '127.0.0.1', port })
  const received: Buffer[] = []
  const errors: string[] = []
  let ended = false
  const closed = new Promise<void>((resolve) => {
    const limit = setTimeout(() => { socket.destroy(); resolve() }, LIMIT_MS)
    socket.on('data', (c: Buffer) => received.push(c))
    socket.on('end', () => { ended = true })
    socket.on('error', (err: Error & { code?: string }) => errors.push(err.code ?? err.message))
    socket.on('close', () => { clearTimeout(limit); resolve() })
  })
  await new Promise<void>((resolve) => socket.once('connect', resolve))
  socket.write(head)
  for (let sent = 0; sent < BODY_BYTES && !socket.readableEnded && !socket.destroyed; sent += CHUNK.length) {
    if (!socket.write(CHUNK)) await new Promise((resolve) => setTimeout(resolve, 5))
    await new Promise((resolve) => setImmediate(resolve))
  }
  await closed
  return { response: Buffer.concat(received).toString('latin1'), ended, errors }
}

const headOf = (lines: string[]): string => `${lines.join('\r\n')}\r\nContent-Length: ${BODY_BYTES}\r\n\r\n`

const NO_TOKEN = headOf(['POST /plants HTTP/1.1', 'Host: localhost', 'Content-Type: application/json'])
const early: Array<[string, number, string]> = [
  ['a body over the limit', 413, headOf(['POST /plants HTTP/1.1', 'Host: localhost', `Authorization: Bearer ${TOKEN}`, 'Content-Type: application/json'])],
  ['no token', 401, NO_TOKEN],
  ['text/plain', 415, headOf(['POST /plants HTTP/1.1', 'Host: localhost', `Authorization: Bearer ${TOKEN}`, 'Content-Type: text/plain'])],
  ['an unknown route', 404, headOf(['POST /nowhere HTTP/1.1', 'Host: localhost', 'Content-Type: application/json'])],
  ['PUT on /plants', 405, headOf(['PUT /plants HTTP/1.1', 'Host: localhost', 'Content-Type: application/json'])]
]

function judge (trial: Trial, status: number): string | undefined {
  const answers = parseAnswers(trial.response)
  const errors = trial.errors.length === 0 ? '' : `, then ${trial.errors.join(', ')}`
  if (answers.length !== 1 || answers[0]?.status !== status) return `answer lost: ${JSON.stringify(answeredStatuses(trial.response))}${errors}`
  if (!trial.ended || errors !== '') return `${trial.ended ? 'FIN' : 'no FIN'}${errors}`
  return undefined
}

t.test('answers given while the client still sends end with a FIN, not a reset', async (t) => {
  // Answers at the edge, no row read: the app runs over the stub store.
  const { port } = await listeningStubApp(t)
  for (const [what, status, head] of early) {
    await t.test(`${what}: ${status}, ${TRIALS} times`, async (t) => {
      const wrong: string[] = []
      for (let i = 0; i < TRIALS; i++) {
        const problem = judge(await sendingExchange(port, head), status)
        if (problem !== undefined) wrong.push(problem)
      }
      t.comment(`figures: ${what} (${status}): ${wrong.length} of ${TRIALS} not clean`)
      t.same(wrong, [], 'the whole answer, then the FIN, every time')
    })
  }
})

// A client that ignores the FIN and goes on sending is cut off: after
// LINGER_MS when it sends slowly, sooner when it sends a lot.
async function carelessExchange (port: number, chunk: Buffer, everyMs: number): Promise<{ response: string, closedAfterMs: number }> {
  const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true })
  const received: Buffer[] = []
  socket.on('data', (c: Buffer) => received.push(c))
  socket.on('error', () => {})
  await new Promise<void>((resolve) => socket.once('connect', resolve))
  const started = performance.now()
  socket.write(NO_TOKEN)
  const timer = setInterval(() => socket.write(chunk), everyMs)
  await new Promise<void>((resolve) => {
    const limit = setTimeout(() => { socket.destroy(); resolve() }, LIMIT_MS)
    socket.on('close', () => { clearTimeout(limit); resolve() })
  })
  clearInterval(timer)
  return { response: Buffer.concat(received).toString('latin1'), closedAfterMs: performance.now() - started }
}

t.test('the lingering close is bounded in time and size', async (t) => {
  // Answers at the edge, no row read: the app runs over the stub store.
  const { port } = await listeningStubApp(t)
  const slow = await carelessExchange(port, Buffer.alloc(1024, 'a'), 50)
  t.same(answeredStatuses(slow.response), [401], 'a slow sender got its answer')
  t.ok(slow.closedAfterMs >= LINGER_MS - 100 && slow.closedAfterMs < LINGER_MS + 3000, `and was cut off after ${Math.round(slow.closedAfterMs)} ms`)
  const fast = await carelessExchange(port, CHUNK, 1)
  t.same(answeredStatuses(fast.response), [401], 'a fast sender got its answer')
  t.ok(fast.closedAfterMs < LINGER_MS, `and was cut off after ${Math.round(fast.closedAfterMs)} ms, by the bytes it sent`)
})

forEachBackend(t, 'a create with Connection: close, then more bytes: 200, then a FIN', async (t, backend) => {
  const { app, port } = await listeningTestApp(t, backend)
  const wrong: string[] = []
  const ids: number[] = []
  for (let i = 0; i < TRIALS; i++) {
    const id = 9100 + i
    ids.push(id)
    const body = JSON.stringify({ id, name: `lingering ${id}` })
    const create = `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    // Behind it, a create of a large plant that must never be processed.
    const behind = `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${BODY_BYTES}\r\n\r\n`
    const problem = judge(await sendingExchange(port, create + behind), 200)
    if (problem !== undefined) wrong.push(problem)
  }
  t.comment(`figures: Connection: close create on ${backend}: ${wrong.length} of ${TRIALS} not clean`)
  t.same(wrong, [], 'the whole answer, then the FIN, every time')
  await sleep(300)
  const stored = (await app.db.query<{ id: string }>('SELECT id::text AS id FROM plants ORDER BY id')).map((r) => Number(r.id))
  t.same(stored, ids, 'each create was stored, and nothing behind it')
})

// A pipelining client that reads late: two creates in one packet (the second is dropped, so the service closes
// after the first one's answer), then, once that answer is out, more requests before it reads anything. The
// service's close must linger: a reset would make the client's next write fail, and the client would lose the
// answer to a create that was stored.
async function lateReaderExchange (port: number, head: string, stored: () => Promise<boolean>): Promise<Trial> {
  const socket = net.connect({ host: '127.0.0.1', port })
  const errors: string[] = []
  socket.on('error', (err: Error & { code?: string }) => errors.push(err.code ?? err.message))
  await new Promise<void>((resolve) => socket.once('connect', resolve))
  socket.pause()
  socket.write(head)
  for (let waited = 0; !(await stored()) && waited < LIMIT_MS; waited += 50) await sleep(50)
  // The answer is written once the row is stored: give it time to go out.
  await sleep(200)
  for (let i = 0; i < 3 && !socket.destroyed; i++) {
    socket.write('GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n', () => {})
    await sleep(50)
  }
  const received: Buffer[] = []
  let ended = false
  await new Promise<void>((resolve) => {
    const limit = setTimeout(() => { socket.destroy(); resolve() }, LIMIT_MS)
    socket.on('data', (c: Buffer) => received.push(c)).on('end', () => { ended = true })
    socket.on('close', () => { clearTimeout(limit); resolve() })
    socket.resume()
  })
  return { response: Buffer.concat(received).toString('latin1'), ended, errors }
}

forEachBackend(t, 'a pipelined create dropped, more requests before the client reads: the first create\'s 200, then a FIN', async (t, backend) => {
  const { app, port } = await listeningTestApp(t, backend)
  const storedIds = async (): Promise<number[]> =>
    (await app.db.query<{ id: string }>('SELECT id::text AS id FROM plants ORDER BY id')).map((r) => Number(r.id))
  const createOf = (id: number): string => {
    const body = JSON.stringify({ id, name: `late reader ${id}` })
    return `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  }
  const wrong: string[] = []
  const ids: number[] = []
  for (let i = 0; i < TRIALS / 2; i++) {
    const id = 9200 + 2 * i
    ids.push(id)
    const problem = judge(await lateReaderExchange(port, createOf(id) + createOf(id + 1), async () => (await storedIds()).includes(id)), 200)
    if (problem !== undefined) wrong.push(problem)
  }
  t.comment(`figures: pipelined create, late reader, on ${backend}: ${wrong.length} of ${TRIALS / 2} not clean`)
  t.same(wrong, [], 'the first create\'s answer, then the FIN, every time')
  t.same(await storedIds(), ids, 'each first create was stored, and none dropped behind it')
})
