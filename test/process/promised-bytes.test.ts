import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { forEachBackend, TOKEN } from '../helper.js'
import { type Answer, sendCreate, startReadyServer, tally } from '../support/big-creates.js'

// Shedding follows the load, not the framing: what a request's head promises
// (a Content-Length near BODY_LIMIT, or chunked) weighs nothing until its
// bytes arrive. On an idle service, clients that promise large bodies and
// send little, and clients that send small bodies chunked, never make the
// service shed other clients' creates of more than 4 KiB.
const DECLARED = 1_048_576
const PHASE_MS = 6_000
// Creates of 8 KiB: larger than any size a rule may leave unweighed.
const LARGE_CREATE_BYTES = 8 * 1024
const LARGE_CREATE_EVERY_MS = 100
// An idle service sheds none of them; a few 503s are allowed for a machine
// that stalls the service for a moment (the loop's own rule), no more.
const SHED_SHARE_LIMIT = 0.05

interface Uploader { stop: () => void, connections: () => number }

// A client that declares a 1 MiB body (Content-Length or chunked), sends
// 16 bytes of it, and gives up and reconnects every 2.9 s.
function promiser (port: number, chunked: boolean): Uploader {
  let socket: net.Socket | undefined
  let connections = 0
  const connect = (): void => {
    connections++
    socket = net.connect({ host: '127.0.0.1', port })
    socket.on('error', () => {})
    socket.write(head(port, chunked) + (chunked ? '10\r\n{"id":1,"name":"x\r\n' : '{"id":1,"name":"x'))
  }
  connect()
  const timer = setInterval(() => {
    socket?.destroy()
    connect()
  }, 2_900)
  return { stop: () => { clearInterval(timer); socket?.destroy() }, connections: () => connections }
}

// A client that declares a 1 MiB body and sends it at 37 KB/s, a pace that
// brings it whole before the server's 30 s request timeout; it reconnects
// when the server ends its connection.
const TRICKLE_BYTES_PER_SECOND = 37_000
const TRICKLE_EVERY_MS = 100
function trickler (port: number, chunked: boolean): Uploader {
  let socket: net.Socket | undefined
  let connections = 0
  let running = true
  const piece = 'x'.repeat(TRICKLE_BYTES_PER_SECOND * TRICKLE_EVERY_MS / 1000)
  const connect = (): void => {
    connections++
    const s = net.connect({ host: '127.0.0.1', port })
    socket = s
    s.on('error', () => {})
    s.once('close', () => { if (running) connect() })
    s.write(head(port, chunked) + (chunked ? '11\r\n{"id":1,"name":"x\r\n' : '{"id":1,"name":"x'))
  }
  connect()
  const timer = setInterval(() => {
    if (socket?.writable === true) socket.write(chunked ? `${piece.length.toString(16)}\r\n${piece}\r\n` : piece)
  }, TRICKLE_EVERY_MS)
  return {
    stop: () => {
      running = false
      clearInterval(timer)
      socket?.destroy()
    },
    connections: () => connections
  }
}

function head (port: number, chunked: boolean): string {
  return `POST /plants HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${TOKEN}\r\n` +
    `Content-Type: application/json\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${DECLARED}`}\r\n\r\n`
}

// Creates of LARGE_CREATE_BYTES with a Content-Length, one every
// LARGE_CREATE_EVERY_MS until stopped, each on a connection of its own.
function largeCreates (url: string, firstId: number): { stop: () => Promise<Answer[]> } {
  const answers: Answer[] = []
  const state = { running: true }
  const loop = (async () => {
    for (let id = firstId; state.running; id++) {
      const next = sleep(LARGE_CREATE_EVERY_MS)
      const name = `${id} `.padEnd(LARGE_CREATE_BYTES, 'x')
      answers.push(await sendCreate(url, id, [Buffer.from(JSON.stringify({ id, name }))], 30_000))
      await next
    }
  })()
  return { stop: async () => { state.running = false; await loop; return answers } }
}

// Small creates sent chunked (no Content-Length, as fetch with a stream body
// sends them), one after another on a kept-alive connection of the client's own.
function chunkedCreates (url: string, firstId: number): { stop: () => Promise<number[]> } {
  const statuses: number[] = []
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const state = { running: true }
  const one = async (id: number): Promise<number> => await new Promise((resolve) => {
    const req = http.request(`${url}/plants`, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }
    }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', () => resolve(0))
    req.write(JSON.stringify({ id, name: 'chunked' }))
    req.end()
  })
  const loop = (async () => {
    for (let id = firstId; state.running; id++) statuses.push(await one(id))
  })()
  return { stop: async () => { state.running = false; await loop; agent.destroy(); return statuses } }
}

const shed = (statuses: number[]): number => statuses.filter((s) => s === 503).length
const share = (statuses: number[]): string => `${shed(statuses)} of ${statuses.length}`

forEachBackend(t, 'what a head promises weighs nothing until it arrives', async (t, backend) => {
  const server = await startReadyServer(t, backend)
  const port = server.port

  const phase = async (name: string, uploaders: Uploader[], firstId: number): Promise<void> => {
    await sleep(500)
    const creates = largeCreates(server.url, firstId)
    await sleep(PHASE_MS)
    const answers = await creates.stop()
    for (const u of uploaders) u.stop()
    const statuses = answers.map((a) => a.status)
    t.comment(`${name}: ${uploaders.reduce((n, u) => n + u.connections(), 0)} connections; ` +
      `other clients' ${LARGE_CREATE_BYTES}-byte creates ${tally(answers)} (503: ${share(statuses)})`)
    t.ok(answers.length >= PHASE_MS / LARGE_CREATE_EVERY_MS / 4, `${name}: creates were sent throughout`)
    t.ok(shed(statuses) <= SHED_SHARE_LIMIT * statuses.length,
      `${name}: other clients' creates over 4 KiB are not shed (${share(statuses)} answered 503)`)
  }

  await phase('4 clients declaring 1 MiB, sending 16 bytes, reconnecting every 2.9 s',
    [promiser(port, false), promiser(port, false), promiser(port, true), promiser(port, true)], 10_000)
  await phase(`4 clients sending 1 MiB at ${TRICKLE_BYTES_PER_SECOND / 1000} KB/s`,
    [trickler(port, false), trickler(port, false), trickler(port, true), trickler(port, true)], 20_000)

  // Small creates sent chunked weigh what arrived, a few dozen bytes each.
  await sleep(500)
  const chunked = Array.from({ length: 8 }, (_, i) => chunkedCreates(server.url, 100_000 * (i + 1)))
  const creates = largeCreates(server.url, 30_000)
  await sleep(PHASE_MS)
  const large = (await creates.stop()).map((a) => a.status)
  const small = (await Promise.all(chunked.map(async (c) => await c.stop()))).flat()
  t.comment(`8 clients sending small creates chunked: their creates 503: ${share(small)}; ` +
    `other clients' ${LARGE_CREATE_BYTES}-byte creates 503: ${share(large)}`)
  t.ok(small.length >= 8 * PHASE_MS / 1000, 'the chunked creates were sent throughout')
  t.same(small.filter((s) => s !== 200 && s !== 503), [], 'every chunked create is answered 200 or 503')
  t.ok(shed(small) <= SHED_SHARE_LIMIT * small.length, `small chunked creates are not shed (${share(small)} answered 503)`)
  t.ok(shed(large) <= SHED_SHARE_LIMIT * large.length, `nor other clients' creates over 4 KiB beside them (${share(large)} answered 503)`)
})
