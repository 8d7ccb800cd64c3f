import t from 'tap'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import { forEachBackend, buildTestApp, TOKEN } from '../helper.js'
import { parseAnswers, rawExchange, request } from '../support/http.js'
import loadShedding from '../../plugins/load-shedding.js'

// The load-shedding plugin's two measures, each driven to its limit over
// real sockets: the bytes of bodies in flight (a small BODY_LIMIT, so its
// budget of a few bodies fills with a few requests) and the event loop's
// delay (the loop kept busy in this process, with a low threshold).

const BODY_LIMIT = 1000
// plugins/load-shedding.ts admits this many bodies of BODY_LIMIT at once.
const BODIES_IN_FLIGHT = 4

// Bodies from this size on are costly to plugins/load-shedding.ts: a saturated loop takes them one at a time.
const COSTLY_LIMIT = 128 * 1024

// A create whose body is exactly `limit` bytes.
function fullBody (id: number, limit = BODY_LIMIT): string {
  const head = `{"id":${id},"name":"`
  return head + 'x'.repeat(limit - head.length - 2) + '"}'
}

function head (port: number, length: number, extra = ''): string {
  return `POST /plants HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${TOKEN}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n`
}

// A create that sends its head and waits for 100 Continue (given once every
// onRequest check has admitted it), then holds its body until send().
async function heldCreate (port: number, id: number, limit = BODY_LIMIT): Promise<{ send(): Promise<string> }> {
  const socket = net.connect({ host: '127.0.0.1', port })
  let received = ''
  socket.on('data', (c: Buffer) => { received += c.toString('latin1') })
  socket.write(head(port, limit, 'Expect: 100-continue\r\n'))
  const deadline = Date.now() + 10_000
  while (!received.startsWith('HTTP/1.1 100')) {
    if (Date.now() > deadline) throw new Error(`create ${id} was not admitted: ${received}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return {
    async send () {
      socket.write(fullBody(id, limit))
      while (parseAnswers(received).length === 0) {
        if (Date.now() > deadline + 10_000) throw new Error(`no answer to create ${id}: ${received}`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      socket.destroy()
      return received
    }
  }
}

forEachBackend(t, 'bodies in flight past the budget are shed before they are read', async (t, backend) => {
  const { app, rows } = await buildTestApp(t, backend, { bodyLimit: BODY_LIMIT })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const url = `http://127.0.0.1:${port}`

  const held = []
  for (let id = 1; id <= BODIES_IN_FLIGHT; id++) held.push(await heldCreate(port, id))

  const shed = await rawExchange(port, [{ data: head(port, BODY_LIMIT) + fullBody(99) }], 10_000)
  const [answer] = parseAnswers(shed.response)
  t.equal(answer?.status, 503, 'a create past the budget is answered 503')
  t.equal(answer?.headers['retry-after'], '1', 'with Retry-After')
  t.equal(answer?.headers.connection, 'close', 'and the connection closes: its body was never read')
  t.same(JSON.parse(answer?.body ?? '{}'), { error: 503, message: 'The service is overloaded (too many request bodies are in progress); retry after the Retry-After delay' }, 'in the Error shape')
  t.equal((await request(`${url}/health/live`)).status, 200, 'the probes are never shed')
  t.equal((await request(`${url}/openapi.json`)).status, 200, 'nor the docs')

  for (const h of held) t.match(parseAnswers(await h.send()).map((a) => a.status), [200], 'an admitted create is stored')
  // Connection: close, so the exchange ends with the answer rather than at its time limit.
  const after = await rawExchange(port, [{ data: head(port, BODY_LIMIT, 'Connection: close\r\n') + fullBody(100) }], 10_000)
  t.equal(parseAnswers(after.response)[0]?.status, 200, 'once they are answered, their bytes are released')
  t.same((await rows()).map((r) => r.id).sort(), ['1', '100', '2', '3', '4'], 'the shed create is not stored')
})

forEachBackend(t, 'a saturated event loop admits one costly body at a time', async (t, backend) => {
  const { app } = await buildTestApp(t, backend, { bodyLimit: COSTLY_LIMIT })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const create = async (id: number): Promise<number> => (await request(`http://127.0.0.1:${port}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: fullBody(id, COSTLY_LIMIT)
  })).status

  const held = await heldCreate(port, 1, COSTLY_LIMIT)
  t.equal(await create(2), 200, 'beside one body in progress, another is admitted while the loop has time')
  // Turns of 20 ms back to back: the loop is busy all the time, yet never late.
  const busy = setInterval(() => {
    const until = Date.now() + 20
    while (Date.now() < until);
  }, 0)
  let status: number | undefined
  for (let id = 3; id < 50 && status !== 503; id++) status = await create(id)
  clearInterval(busy)
  t.equal(status, 503, 'while it is saturated, a second large body is shed')
  for (let id = 100; id < 150 && status !== 200; id++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    status = await create(id)
  }
  t.equal(status, 200, 'admitted again once the loop has time')
  t.match(parseAnswers(await held.send()).map((a) => a.status), [200], 'the body in progress is stored all along')
})

t.test('a late event loop sheds new requests until it catches up', async (t) => {
  const app = Fastify()
  await app.register(loadShedding, { bodyLimit: BODY_LIMIT, maxEventLoopDelayMs: 20 })
  app.post('/plants', async () => ({ ok: true }))
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/plants`
  const post = async (): Promise<{ status: number, headers: Record<string, unknown>, body: string }> =>
    await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })

  t.equal((await post()).status, 200, 'admitted while the loop keeps time')
  // Turns of 100 ms, back to back: every sample of the loop's delay is late.
  const busy = setInterval(() => {
    const until = Date.now() + 100
    while (Date.now() < until);
  }, 1)
  let shed: Awaited<ReturnType<typeof post>> | undefined
  for (let i = 0; i < 50 && shed === undefined; i++) {
    const res = await post()
    if (res.status === 503) shed = res
  }
  clearInterval(busy)
  t.equal(shed?.headers['retry-after'], '1', 'a late loop sheds with 503 and Retry-After')
  t.match(shed?.body, /event loop is behind/, 'saying why')

  let status = 0
  for (let i = 0; i < 100 && status !== 200; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    status = (await post()).status
  }
  t.equal(status, 200, 'admitted again once the loop has caught up')
})
