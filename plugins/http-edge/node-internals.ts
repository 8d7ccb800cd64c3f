import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import net, { type AddressInfo, type Socket } from 'node:net'
import { once } from 'node:events'

// Every private field of Node's HTTP server (lib/_http_server.js) that the
// service touches, and the check that they still exist and behave as the
// connection rules (connection.ts) rely on. Nothing else in the
// service reads or writes a field of Node's that is not documented.
//
// - `socket._httpMessage`: the response being written on a socket; the
//   responses of later pipelined requests wait in Node's queue and get the
//   socket, with a 'socket' event, once the one before has finished.
// - `socket._paused` and `socket._handle.readStop()` / `.reading`: Node's
//   parser reads the handle directly and resumes a paused socket when its
//   answers drain; only stopping the handle stops reading for good.
// - `server.httpAllowHalfOpen`: with it, a client that half-closes after
//   its request still gets its answers, then the connection closes; without
//   it Node ends the connection before the answer is written.
//
// A Node release may rename or drop any of them. The check exercises a real
// loopback server once per process, before the service listens: reading
// the fields is not enough, they must also do what is relied on (a field
// that exists but is no longer used by Node would fail in silence). If it
// fails, the connection rules switch to a safe mode that needs none of them
// (see connection.ts), and the service says so once, at warn.

interface InternalSocket extends Socket {
  _httpMessage?: ServerResponse | null
  _paused?: boolean
  _handle?: { readStop?: () => number, reading?: boolean } | null
}

// The response Node is writing on this socket; null when none; undefined
// for a socket that is not one of Node's server's (app.inject's stand-in).
export function currentResponse (socket: Socket): ServerResponse | null | undefined {
  return (socket as InternalSocket)._httpMessage
}

// Stops Node's parser from reading the socket: the handle stops reading,
// and stays marked as reading and the socket as paused, so neither Node's
// net module nor its HTTP server starts it again.
export function stopHandleReading (socket: Socket): void {
  const s = socket as InternalSocket
  s._paused = true
  const handle = s._handle
  if (handle?.readStop !== undefined) {
    handle.readStop()
    handle.reading = true
  }
}

// Lets a client half-close after its request: see the list above.
export function answerHalfClosedClients (server: Server): void {
  (server as Server & { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true
}

export interface InternalsCheck {
  ok: boolean
  // What did not exist or did not behave as relied on.
  failed: string[]
}

let checked: Promise<InternalsCheck> | undefined
let usable = false

// Whether the check passed: until it has run, the safe mode applies.
export function nodeInternalsUsable (): boolean {
  return usable
}

// Runs the check once per process; every later call shares its result.
export async function checkNodeInternals (timeoutMs = 5000): Promise<InternalsCheck> {
  checked ??= probe(timeoutMs).then((result) => {
    usable = result.ok
    return result
  })
  return await checked
}

// A loopback server, and a client that sends two requests in one packet
// and then half-closes. What the
// server sees of each field, and what the client gets back, is compared
// with what the connection rules rely on.
async function probe (timeoutMs: number): Promise<InternalsCheck> {
  const failed = new Set<string>()
  const expect = (ok: boolean, what: string): void => { if (!ok) failed.add(what) }
  const server = http.createServer()
  answerHalfClosedClients(server)
  let first: ServerResponse | undefined
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as InternalSocket
    if (first === undefined) {
      first = res
      expect(socket._httpMessage === res, 'socket._httpMessage is the response being written')
      expect(typeof socket._paused === 'boolean', 'socket._paused')
      expect(typeof socket._handle?.readStop === 'function' && typeof socket._handle.reading === 'boolean', 'socket._handle.readStop and .reading')
      // Answered a little later, so the second request has to wait its turn.
      setTimeout(() => res.end('first'), 20)
      return
    }
    expect(socket._httpMessage === first, 'a pipelined response waits while socket._httpMessage is the one before')
    res.once('socket', () => {
      expect(socket._httpMessage === res, 'the waiting response gets the socket, with a socket event')
      res.end('second')
    })
  })
  try {
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const { port } = server.address() as AddressInfo
    const answers = await exchange(port, timeoutMs)
    expect(/^HTTP\/1\.1 200 [^]*first[^]*HTTP\/1\.1 200 [^]*second$/.test(answers), 'server.httpAllowHalfOpen: a half-closed client gets both answers, then the end')
  } catch (err) {
    failed.add(`the loopback check itself: ${(err as Error).message}`)
  } finally {
    server.closeAllConnections()
    server.close()
  }
  return { ok: failed.size === 0, failed: [...failed] }
}

async function exchange (port: number, timeoutMs: number): Promise<string> {
  const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true })
  const received: Buffer[] = []
  socket.on('data', (c: Buffer) => received.push(c))
  try {
    await once(socket, 'connect')
    socket.end('GET /1 HTTP/1.1\r\nHost: probe\r\n\r\n' +
      'GET /2 HTTP/1.1\r\nHost: probe\r\n\r\n')
    const timer = setTimeout(() => socket.destroy(new Error(`no end within ${timeoutMs} ms`)), timeoutMs)
    try {
      await once(socket, 'end')
    } finally {
      clearTimeout(timer)
    }
    return Buffer.concat(received).toString('latin1')
  } finally {
    socket.destroy()
  }
}
