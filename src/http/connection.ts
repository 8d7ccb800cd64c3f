import type { ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'

// One connection's answers, in order and final. Two rules live here:
// - after an answer that ends the connection (Connection: close, or an
//   answer to malformed HTTP or a slow client), nothing more is read from
//   it, so nothing sent later is ever processed;
// - pipelined requests are processed one at a time, in order, so a request
//   is only processed when its answer can still be sent.
//
// It relies on Node's HTTP server internals (lib/_http_server.js, Node 20
// and 22): a socket's `_httpMessage` is the response being written on it;
// responses of later pipelined requests wait in a queue and get the socket,
// with a 'socket' event, once the one before has finished; a finished
// response that carried Connection: close ends the socket instead.

const kStopped = Symbol('plant-store.connection.stopped')
const kWaiting = Symbol('plant-store.connection.waiting')

interface HttpSocket extends Socket {
  _httpMessage?: ServerResponse | null
  // Node's http server pauses a socket with this set, and re-pauses it when
  // it is resumed while set.
  _paused?: boolean
  _handle?: { readStop?: () => number, reading?: boolean } | null
  [kStopped]?: true
  [kWaiting]?: Set<() => void>
}

// Stops reading from the socket at once, for good. Node's parser reads the
// socket's handle directly; pausing the stream alone would not stop it, and
// Node resumes a paused socket when its responses drain. The handle stops
// reading, and stays marked as reading so neither Node's net module nor its
// http server starts it again.
export function stopReading (socket: Socket): void {
  // app.inject's requests have a stand-in, not a socket.
  if (!(socket instanceof Socket)) return
  const s = socket as HttpSocket
  if (s[kStopped] === true) return
  s[kStopped] = true
  s._paused = true
  s.pause()
  const handle = s._handle
  if (handle?.readStop !== undefined) {
    handle.readStop()
    handle.reading = true
  }
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
    const res = s._httpMessage
    if (res === null || res === undefined || res.writableFinished) return then(undefined)
    if (res.req.complete === false) return then(res)
    // 'close' follows 'finish' (Node has handed the socket on by then), or
    // the socket's loss.
    res.once('close', next)
  }
  next()
}

// The first check of every request (plugins/http-edge.ts): `next` runs
// once it is the request's turn. A request whose response is not the one
// being written on its socket was pipelined behind another: it waits for
// its turn, and is dropped unprocessed if the connection closes before that
// (an earlier answer carried Connection: close, or the client went away).
// The common case, one request at a time, costs one identity check.
export type OnRequestStep = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

export function inTurn (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, next: OnRequestStep): void {
  const socket = request.raw.socket as HttpSocket | undefined
  const current = socket?._httpMessage
  // undefined: not a socket of Node's server (app.inject).
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
