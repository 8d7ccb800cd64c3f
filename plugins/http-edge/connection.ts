import type { ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { currentResponse, nodeInternalsUsable, stopHandleReading } from './node-internals.js'

// One connection's answers, in order and final. Two rules live here:
// - after an answer that ends the connection (Connection: close, or an
//   answer to malformed HTTP or a slow client), nothing more is read from
//   it, so nothing sent later is ever processed;
// - pipelined requests are processed one at a time, in order, so a request
//   is only processed when its answer can still be sent.
//
// It relies on private fields of Node's HTTP server, all in
// node-internals.ts, which checks them once at start-up. If the check
// failed, a safe mode keeps the same rules without them: a request
// pipelined behind one still being answered is dropped unprocessed, and
// the connection closes once the answer under way is sent.

const kStopped = Symbol('plant-store.connection.stopped')
const kWaiting = Symbol('plant-store.connection.waiting')
// Safe mode: the response being written on the socket, and whether the
// connection closes after it.
const kAnswering = Symbol('plant-store.connection.answering')
const kCloseAfter = Symbol('plant-store.connection.close-after')

interface HttpSocket extends Socket {
  [kStopped]?: true
  [kWaiting]?: Set<() => void>
  [kAnswering]?: ServerResponse
  [kCloseAfter]?: true
}

// Stops reading from the socket at once, for good: pausing the stream alone
// would not stop Node's parser (see stopHandleReading). In safe mode the
// socket is only paused: whatever Node still parses from it is dropped
// unprocessed (closing(), below).
export function stopReading (socket: Socket): void {
  // app.inject's requests have a stand-in, not a socket.
  if (!(socket instanceof Socket)) return
  const s = socket as HttpSocket
  if (s[kStopped] === true) return
  s[kStopped] = true
  s.pause()
  if (nodeInternalsUsable()) stopHandleReading(s)
}

export function stoppedReading (socket: Socket): boolean {
  return (socket as HttpSocket)[kStopped] === true
}

// Sends a last answer and closes: the answer is flushed, then the socket is
// destroyed (ending it alone would leave it half open, and readable).
export function answerAndClose (socket: Socket, answer: string): void {
  stopReading(socket)
  socket.end(answer, () => socket.destroy())
}

// Calls `then` once every answer already under way on this socket has been
// sent, with the response of a request that is still incomplete (the one a
// timeout is about: it cannot be answered otherwise), if any. If an answer
// closes the connection first, the socket is destroyed and `then` is never
// called: no answer may follow it.
export function afterEarlierAnswers (socket: Socket, then: (incomplete: ServerResponse | undefined) => void): void {
  const s = socket as HttpSocket
  const next = (): void => {
    if (s.destroyed) return
    if (!s.writable) {
      s.destroy()
      return
    }
    const res = nodeInternalsUsable() ? currentResponse(s) : s[kAnswering]
    if (res === null || res === undefined || res.writableFinished) return then(undefined)
    if (res.req.complete === false) return then(res)
    // 'close' follows 'finish' (Node has handed the socket on by then), or
    // the socket's loss.
    res.once('close', next)
  }
  next()
}

// The first check of every request (index.ts): `next` runs
// once it is the request's turn. A request whose response is not the one
// being written on its socket was pipelined behind another: it waits for
// its turn, and is dropped unprocessed if the connection closes before that
// (an earlier answer carried Connection: close, or the client went away).
// A request read after an answer that closed the connection is dropped at
// once. The common case, one request at a time, costs a few field reads.
export type OnRequestStep = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

export function inTurn (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, next: OnRequestStep): void {
  if (!nodeInternalsUsable()) return inTurnSafely(request, reply, done, next)
  const socket = request.raw.socket as HttpSocket | undefined
  // undefined: not a socket of Node's server (app.inject).
  const current = socket === undefined ? undefined : currentResponse(socket)
  if (socket === undefined || current === undefined) return next(request, reply, done)
  const res = reply.raw
  if (closing(socket)) {
    // Read before an answer closed the connection, often in the same
    // packet: the answer before this one finished while Node was still
    // parsing, so this request may even hold the socket now.
    socket.destroy()
    dropUnprocessed(request, reply, done)
    return
  }
  if (current === res) return next(request, reply, done)
  const waiting = socket[kWaiting] ?? watchClose(socket)
  function dropped (): void {
    res.removeListener('socket', turn)
    waiting.delete(dropped)
    dropUnprocessed(request, reply, done)
  }
  function turn (): void {
    waiting.delete(dropped)
    if (socket === undefined || closing(socket)) {
      socket?.destroy()
      dropped()
      return
    }
    next(request, reply, done)
  }
  if (current === null || socket.destroyed) {
    // Nothing is being written, yet this response was not given the
    // socket: the connection is going away.
    socket.destroy()
    dropped()
    return
  }
  waiting.add(dropped)
  res.once('socket', turn)
}

// inTurn without Node's private fields: only a request alone on its
// connection is processed. One that arrives while another is being answered
// is dropped unprocessed, and the connection closes after the answer under
// way (Connection: close when its head is not sent yet), so no request is
// processed that cannot be answered in order.
function inTurnSafely (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, next: OnRequestStep): void {
  const socket = request.raw.socket
  if (!(socket instanceof Socket)) return next(request, reply, done)
  const s = socket as HttpSocket
  const answering = s[kAnswering]
  if (closing(s) || answering !== undefined) {
    if (answering === undefined) s.destroy()
    else closeAfter(s, answering)
    dropUnprocessed(request, reply, done)
    return
  }
  const res = reply.raw
  s[kAnswering] = res
  res.once('close', () => {
    s[kAnswering] = undefined
    // Node hands the socket to the dropped requests' responses next.
    if (s[kCloseAfter] === true) s.end(() => s.destroy())
  })
  next(request, reply, done)
}

function closeAfter (s: HttpSocket, answering: ServerResponse): void {
  if (s[kCloseAfter] === true) return
  s[kCloseAfter] = true
  stopReading(s)
  if (!answering.headersSent) answering.setHeader('connection', 'close')
}

// The connection is going away: an answer closed it (reading stopped, or
// Node ended the socket after it), or the client did.
function closing (socket: HttpSocket): boolean {
  return socket[kStopped] === true || socket.destroyed || !socket.writable
}

function dropUnprocessed (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  request.log.info('pipelined request dropped unprocessed: the connection closed before its turn')
  reply.hijack()
  done()
}

// One 'close' listener per socket, however many requests wait on it.
function watchClose (socket: HttpSocket): Set<() => void> {
  const waiting = new Set<() => void>()
  socket[kWaiting] = waiting
  socket.once('close', () => {
    for (const drop of waiting) drop()
    waiting.clear()
  })
  return waiting
}
