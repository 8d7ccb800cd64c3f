import { STATUS_CODES, type Server, type ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { RETRY_AFTER_SECONDS, rawError, sendError } from '../error-answers.js'

// The contract's connection rules, on public APIs of Node and Fastify:
// - one request at a time: a pipelined request is dropped unprocessed and
//   the connection closes after the answer under way (nothing unanswered is stored);
// - after an answer that closes the connection nothing more is processed;
// - the close lingers (RFC 9112 9.6): closing with unread bytes makes the
//   kernel send a reset, which can destroy the answer before it is read.

// Long enough for a client to read its answer and stop sending; too short
// and small for a client to hold a connection open with it.
export const LINGER_MS = 2_000
export const LINGER_BYTES = 256 * 1024

interface Connection {
  // The response to the request being processed, until it is written.
  answering?: ServerResponse
  // The connection closes after the answer under way.
  closing?: true
  lingering?: true
}

const connections = new WeakMap<Socket, Connection>()

function connectionOf (socket: Socket): Connection {
  let connection = connections.get(socket)
  if (connection === undefined) {
    connection = {}
    connections.set(socket, connection)
  }
  return connection
}

// The first onRequest hook.
export function serveOneAtATime (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const socket = request.raw.socket
  // app.inject's requests have a stand-in, not a socket.
  if (!(socket instanceof Socket)) return done()
  const connection = connectionOf(socket)
  if (connection.answering !== undefined || connection.closing === true || !socket.writable) {
    closeAfterAnswer(socket)
    request.log.info('request dropped unprocessed: it arrived before the answer to the one before it was written')
    reply.hijack()
    return
  }
  const res = reply.raw
  connection.answering = res
  res.once('finish', () => {
    connection.answering = undefined
    // Node's own 'finish' listener ran first: it has ended the socket if
    // the answer closed the connection.
    if (connection.closing === true || !socket.writable) lingeringClose(socket)
  })
  res.once('close', () => { connection.answering = undefined })
  done()
}

// The connection closes once the answer under way is written, with
// Connection: close while its head can still say so; a request read
// meanwhile is dropped unprocessed (serveOneAtATime). The socket is not
// paused: its end must still be read for the lingering close to finish.
export function closeAfterAnswer (socket: Socket): void {
  if (!(socket instanceof Socket)) return
  const connection = connectionOf(socket)
  if (connection.closing === true) return
  connection.closing = true
  const res = connection.answering
  if (res !== undefined && !res.headersSent) res.setHeader('connection', 'close')
}

// An answer given before the request body has fully arrived (401, 415, 413
// are decided before reading it, 404 and 405 before routing to it) closes
// the connection: otherwise Node reads the rest of the body on a keep-alive
// connection, and a client that stalls there gets a second, unsolicited 408.
export function closeIfBodyUnread (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void {
  if (request.raw.complete === false) reply.header('connection', 'close')
  if (reply.getHeader('connection') === 'close' || !reply.raw.shouldKeepAlive) closeAfterAnswer(request.raw.socket)
  done(null, payload)
}

// The last answer on a connection, written outside Fastify (malformed HTTP,
// a slow client, CONNECT), then a lingering close. Not sent (false) when
// closing already, when a complete request's answer is under way (it goes
// out: a stored create keeps its answer), or when the incomplete request's
// answer has begun (a second would corrupt the stream).
export function writeClosingAnswer (socket: Socket, status: number, reqId: string, message?: string): boolean {
  const connection = connectionOf(socket)
  if (connection.closing === true) return false
  const res = connection.answering
  if (res?.req.complete === true) {
    closeAfterAnswer(socket)
    return false
  }
  if (res?.headersSent === true) {
    socket.destroy()
    return false
  }
  connection.closing = true
  const { body, headers } = rawError(status, reqId, message)
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${head}\r\n${body}`)
  lingeringClose(socket)
  return true
}

// Ends the server's side, then reads and discards what the client still
// sends until it closes its side (net.Socket closes once both sides have
// ended), LINGER_MS pass or LINGER_BYTES arrive.
export function lingeringClose (socket: Socket): void {
  const connection = connectionOf(socket)
  if (socket.destroyed || connection.lingering === true) return
  connection.lingering = true
  connection.closing = true
  // Node's HTTP server destroys the socket as soon as its end is written
  // (net's destroySoon): that destroy waits for the client here instead.
  socket.removeListener('finish', socket.destroy)
  socket.end()
  // Node's HTTP parser is fed by its 'data' listener: without it nothing
  // more is parsed, and the listener below only counts what it discards.
  socket.removeAllListeners('data')
  let discarded = 0
  socket.on('data', (chunk: Buffer) => {
    discarded += chunk.length
    if (discarded > LINGER_BYTES) socket.destroy()
  })
  const bound = setTimeout(() => socket.destroy(), LINGER_MS)
  socket.once('close', () => clearTimeout(bound))
  socket.resume()
}

// A client that half-closes after its request still gets its answer. Node
// needs httpAllowHalfOpen for that, a field it does not document: checked,
// so a Node without it fails at start-up rather than in a client's answer.
export function answerHalfClosedClients (server: Server): void {
  const s = server as Server & { httpAllowHalfOpen?: unknown }
  if (typeof s.httpAllowHalfOpen !== 'boolean') {
    throw new Error('This Node\'s HTTP server has no httpAllowHalfOpen: a client that half-closes would lose its answer')
  }
  s.httpAllowHalfOpen = true
}

// Once close has begun, a request on an open keep-alive connection is
// refused with Connection: close, so the drain ends (Fastify's own
// return503OnClosing answers outside the Error shape).
export function refuseWhileClosing (app: FastifyInstance): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  let closing = false
  app.addHook('preClose', async () => { closing = true })
  return function refuseIfClosing (request, reply, done) {
    if (!closing) return done()
    request.log.info('refused: shutting down')
    reply.header('connection', 'close')
    sendError(reply, 503, 'The service is shutting down; retry later', RETRY_AFTER_SECONDS.shuttingDown)
  }
}
