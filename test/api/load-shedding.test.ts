import t from 'tap'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { forEachBackend, buildTestApp, TOKEN } from '../helper.js'
import { parseAnswers, rawExchange, request } from '../support/http.js'

// The load-shedding plugin's measures, each driven to its limit over real
// sockets: the bytes of bodies held (a small BODY_LIMIT, so its budget of a
// few bodies fills with a few requests) and the saturated event loop (kept
// busy in this process), which sheds costly bodies and takes small ones.

const BODY_LIMIT = 1000
// plugins/load-shedding.ts holds this many bodies of BODY_LIMIT at once.
const BODIES_HELD = 8

// Bodies from 64 KiB on are costly to plugins/load-shedding.ts: a saturated loop takes none.
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
// onRequest check has admitted it), then holds its body until send(), or
// sends all of it but the last byte with sendAllButOne(). A large body shed
// because this process's own loop is saturated is asked for again, as a
// client does after Retry-After.
async function heldCreate (port: number, id: number, limit = BODY_LIMIT): Promise<{ send(): Promise<string>, sendAllButOne(): void }> {
  const deadline = Date.now() + 10_000
  let socket: net.Socket
  let received = ''
  do {
    socket = net.connect({ host: '127.0.0.1', port })
    received = ''
    socket.on('data', (c: Buffer) => { received += c.toString('latin1') })
    socket.write(head(port, limit, 'Expect: 100-continue\r\n'))
    while (!received.startsWith('HTTP/1.1 100') && !/event loop is saturated/.test(received)) {
      if (Date.now() > deadline) throw new Error(`create ${id} was not admitted: ${received}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    if (!received.startsWith('HTTP/1.1 100')) {
      socket.destroy()
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  } while (!received.startsWith('HTTP/1.1 100'))
  let sent = 0
  return {
    sendAllButOne () {
      socket.write(fullBody(id, limit).slice(0, -1))
      sent = limit - 1
    },
    async send () {
      socket.write(fullBody(id, limit).slice(sent))
      while (parseAnswers(received).length === 0) {
        if (Date.now() > deadline + 10_000) throw new Error(`no answer to create ${id}: ${received}`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      socket.destroy()
      return received
    }
  }
}

forEachBackend(t, 'bodies held past the budget are shed before they are read; bodies promised are not held', async (t, backend) => {
  const { app, rows } = await buildTestApp(t, backend, { bodyLimit: BODY_LIMIT })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const url = `http://127.0.0.1:${port}`
  const shedOne = async (id: number): Promise<ReturnType<typeof parseAnswers>[number] | undefined> =>
    parseAnswers((await rawExchange(port, [{ data: head(port, BODY_LIMIT) + fullBody(id) }], 10_000)).response)[0]

  // Admitted and promising BODY_LIMIT each, yet nothing of their bodies has arrived.
  const held = []
  for (let id = 1; id <= BODIES_HELD + 1; id++) held.push(await heldCreate(port, id))
  const promised = await rawExchange(port, [{ data: head(port, BODY_LIMIT, 'Connection: close\r\n') + fullBody(98) }], 10_000)
  t.equal(parseAnswers(promised.response)[0]?.status, 200, 'bodies promised but not sent hold nothing: another create is stored')

  // Then all of each body but its last byte arrives: more than the budget is held.
  for (const h of held) h.sendAllButOne()
  await new Promise((resolve) => setTimeout(resolve, 300))
  const answer = await shedOne(99)
  t.equal(answer?.status, 503, 'a create past the budget of bytes held is answered 503')
  t.equal(answer?.headers['retry-after'], '1', 'with Retry-After')
  t.equal(answer?.headers.connection, 'close', 'and the connection closes: its body was never read')
  t.same(JSON.parse(answer?.body ?? '{}'), { error: 503, message: 'The service is overloaded (too many request bodies are in progress); retry after the Retry-After delay' }, 'in the Error shape')
  t.equal((await request(`${url}/health/live`)).status, 200, 'the probes are never shed')
  t.equal((await request(`${url}/openapi.json`)).status, 200, 'nor the docs')

  for (const h of held) t.match(parseAnswers(await h.send()).map((a) => a.status), [200], 'an admitted create is stored')
  // Connection: close, so the exchange ends with the answer rather than at its time limit.
  const after = await rawExchange(port, [{ data: head(port, BODY_LIMIT, 'Connection: close\r\n') + fullBody(100) }], 10_000)
  t.equal(parseAnswers(after.response)[0]?.status, 200, 'once they are answered, their bytes are released')
  const admitted = [...Array.from({ length: held.length }, (_, i) => i + 1), 98, 100].map(String).sort()
  t.same((await rows()).map((r) => r.id).sort(), admitted, 'the shed create is not stored')
})

forEachBackend(t, 'a saturated event loop takes large bodies one client at a time, and small ones always', async (t, backend) => {
  const { app } = await buildTestApp(t, backend, { bodyLimit: COSTLY_LIMIT })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const answer = async (id: number, bytes = COSTLY_LIMIT): Promise<{ status: number, body: string }> => await request(`http://127.0.0.1:${port}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: fullBody(id, bytes)
  })

  // Turns of 20 ms back to back: the loop is busy all the time, yet never late.
  const busy = setInterval(() => {
    const until = Date.now() + 20
    while (Date.now() < until);
  }, 0)
  await new Promise((resolve) => setTimeout(resolve, 300))
  const oneAfterAnother = []
  for (let id = 2; id < 6; id++) oneAfterAnother.push((await answer(id)).status)
  // Now a large body arrives beside the next one.
  const held = await heldCreate(port, 1, COSTLY_LIMIT)
  held.sendAllButOne()
  await new Promise((resolve) => setTimeout(resolve, 50))
  const shed = await answer(6)
  const small = await answer(7, 200)
  clearInterval(busy)
  t.same(oneAfterAnother, [200, 200, 200, 200], 'while it is saturated, one client\'s large bodies sent one after another are taken')
  t.equal(shed.status, 503, 'while a large body arrives, another is shed')
  t.match(shed.body, /event loop is saturated/, 'saying why')
  t.equal(small.status, 200, 'a small body is still taken')
  t.match(parseAnswers(await held.send()).map((a) => a.status), [200], 'the body in progress is stored')
  let status = 0
  for (let id = 100; id < 150 && status !== 200; id++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    status = (await answer(id)).status
  }
  t.equal(status, 200, 'large bodies are taken again once the loop has time')
})

forEachBackend(t, 'large bodies arriving fast are taken a few at a time; slow ones do not count', async (t, backend) => {
  const { app } = await buildTestApp(t, backend, { bodyLimit: COSTLY_LIMIT })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const create = async (id: number, bytes = COSTLY_LIMIT): Promise<{ status: number, body: string }> => await request(`http://127.0.0.1:${port}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: fullBody(id, bytes)
  })

  // Two bodies of 128 KiB, all of each but a byte sent at once: they arrive at far more than BODY_LIMIT a second.
  const arriving = [await heldCreate(port, 1, COSTLY_LIMIT), await heldCreate(port, 2, COSTLY_LIMIT)]
  for (const a of arriving) a.sendAllButOne()
  await new Promise((resolve) => setTimeout(resolve, 100))
  const third = await create(3)
  t.equal(third.status, 503, 'a third large body is shed while two arrive')
  t.match(third.body, /too many large request bodies are arriving/, 'saying why')
  t.equal((await create(4, 200)).status, 200, 'a small body is still taken')
  // Past a second, 128 KiB have come slower than BODY_LIMIT a second: the two are slow uploads now.
  await new Promise((resolve) => setTimeout(resolve, 1200))
  t.equal((await create(5)).status, 200, 'once they have come slower than BODY_LIMIT a second, they no longer count')
  for (const a of arriving) t.match(parseAnswers(await a.send()).map((r) => r.status), [200], 'the bodies in progress are stored')
})
