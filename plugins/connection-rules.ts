import fp from 'fastify-plugin'
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import { errorBody, everyAnswerHeaders, JSON_CONTENT_TYPE } from '../src/http-error.js'
import { ACCESS_LINE, edgeAccessFields, genReqId, newRequestId } from './access-log.js'
import { frameworkErrorHandler } from './error-answers.js'

// The connection rules this contract adds to what Node and Fastify do (docs/architecture.md, "The connection
// rules"): pipelined requests served one at a time, an answer given while the client still sends held until those
// bytes are read (a lingering close), malformed HTTP and CONNECT answered in the Error shape, an Expect other than
// 100-continue refused, and a client that half-closes still answered. Only public APIs of Node and Fastify.

// How long a client may go on sending (up to twice BODY_LIMIT) once its answer is ready.
export const LINGER_MS = 2_000

// The response under way on each connection, to tell a pipelined request.
const answering = new WeakMap<Socket, ServerResponse>()
// Connections that close after the answer under way: nothing that arrives on them is processed.
const closing = new WeakSet<Socket>()
// What a client still sends behind the request being answered, until it has been read and discarded.
const stillSending = new WeakMap<Socket, Promise<void>>()

function holdFor (socket: Socket, read: Promise<void>): void {
  stillSending.set(socket, Promise.all([stillSending.get(socket), read]).then(() => {}))
}

// A request that arrives before the answer to the one before it is written, or after an answer that closes the
// connection, is dropped unprocessed, and the connection closes after that answer (RFC 9112 9.3.2).
function serveOneAtATime (request: FastifyRequest, reply: FastifyReply): boolean {
  const socket = request.raw.socket
  // The requests of app.inject have a stand-in, not a socket.
  if (!(socket instanceof Socket)) return true
  const previous = answering.get(socket)
  if (socket.writable && !closing.has(socket) && (previous === undefined || previous.writableFinished)) {
    answering.set(socket, reply.raw)
    return true
  }
  request.log.info('request dropped unprocessed: it arrived before the answer to the one before it was written')
  reply.hijack()
  holdFor(socket, bodyRead(request))
  if (previous !== undefined && !previous.writableFinished) closeAfter(previous, socket)
  return false
}

// An answer given while the client still sends waits until those bytes are read and discarded, then closes the
// connection: the close is then a FIN, not a reset that could destroy the answer (RFC 9112 9.6). A client that
// waits for 100 Continue sends no body, so its answer goes at once.
function holdClosingAnswer (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void {
  const req = request.raw
  const unread = req.complete === false && req.headers.expect === undefined
  const behind = stillSending.get(req.socket as Socket)
  if (req.complete === false) reply.header('connection', 'close')
  // Node ends the connection once an answer with Connection: close is written, but a request may reach the hooks
  // before that: it is dropped. (The written response no longer shows its headers, so they are read here.)
  if (/\bclose\b/i.test(String(reply.getHeader('connection') ?? ''))) closing.add(req.socket as Socket)
  if (!unread && behind === undefined) return done(null, payload)
  Promise.all([behind, unread ? bodyRead(request) : undefined]).then(() => done(null, payload), () => done(null, payload))
}

// Reads and discards the rest of a request's body. It gives up after LINGER_MS or twice BODY_LIMIT, past which
// the client is not sending a request the service could take, and the close may reset its connection after all.
async function bodyRead (request: FastifyRequest): Promise<void> {
  const req = request.raw
  const maxBytes = 2 * (request.server.initialConfig.bodyLimit ?? 0)
  await new Promise<void>((resolve) => {
    let bytes = 0
    const count = (chunk: Buffer): void => {
      bytes += chunk.length
      if (bytes > maxBytes) finish()
    }
    const finish = (): void => {
      clearTimeout(timer)
      req.off('data', count)
      resolve()
    }
    const timer = setTimeout(finish, LINGER_MS)
    req.on('data', count).once('end', finish).once('close', finish)
    req.resume()
  })
}

// Closes the connection gracefully once res is written. Not by Connection: close: Node closes the socket at once
// after such an answer, and a pipelining client that is still sending would get a reset that can destroy it.
// The answer sends no Connection header rather than Node's keep-alive, which it would not keep.
function closeAfter (res: ServerResponse, socket: Socket): void {
  if (closing.has(socket)) return
  closing.add(socket)
  if (!res.headersSent) res.removeHeader('connection')
  res.once('finish', () => endGracefully(socket))
}

// Ends the server's side, then discards what the client still sends until it closes or LINGER_MS pass:
// unread bytes would turn the close into a reset.
function endGracefully (socket: Socket, last = ''): void {
  socket.end(last)
  socket.resume()
  setTimeout(() => socket.destroy(), LINGER_MS).unref()
}

// An Error answer for a connection Fastify does not handle (malformed HTTP, CONNECT, an unmet Expect).
function rawError (status: number, reqId: string, message?: string): { body: string, headers: Record<string, string | number> } {
  const body = JSON.stringify(errorBody(status, message))
  const headers = { 'content-type': JSON_CONTENT_TYPE, ...everyAnswerHeaders(reqId), 'content-length': Buffer.byteLength(body), connection: 'close' }
  return { body, headers }
}

// An answer written outside Fastify. It is not written (false) when the connection is closing already, when the
// answer to a complete request is under way (so a stored create keeps its answer), or when the answer to an
// incomplete request has begun (a second answer would corrupt the stream).
function writeLastAnswer (socket: Socket, status: number, reqId: string, message?: string): boolean {
  if (!socket.writable) return false
  const res = answering.get(socket)
  if (res !== undefined && !res.writableFinished) {
    if (res.req.complete) {
      closeAfter(res, socket)
      return false
    }
    if (res.headersSent) {
      socket.destroy()
      return false
    }
    // Answered here instead: the rest of its body is left unread, so it is never processed.
    res.req.pause()
  }
  const { body, headers } = rawError(status, reqId, message)
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  endGracefully(socket, `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${head}\r\n${body}`)
  return true
}

// Node's parser refuses, chunk by chunk, what a client sends after an answer with Connection: close. Those bytes
// hold the answer until IDLE_MS pass without a chunk (a sender that a busy machine holds up is not done yet), or
// until LINGER_MS or twice BODY_LIMIT have passed since the first.
const IDLE_MS = 500
const afterClose = new WeakMap<Socket, () => void>()

function bytesAfterClose (socket: Socket, bodyLimit: number): void {
  const more = afterClose.get(socket)
  if (more !== undefined) return more()
  const from = socket.bytesRead
  let idle: NodeJS.Timeout | undefined
  holdFor(socket, new Promise<void>((resolve) => {
    const bound = setTimeout(resolve, LINGER_MS)
    const chunk = (): void => {
      clearTimeout(idle)
      if (socket.bytesRead - from > 2 * bodyLimit) return resolve()
      idle = setTimeout(() => { clearTimeout(bound); resolve() }, IDLE_MS)
    }
    afterClose.set(socket, chunk)
    chunk()
  }))
}

// HTTP that Node's parser rejected (408 for a slow client, 431 for headers too large, else 400), answered in the
// Error shape. No request was parsed, so its id is a fresh one.
function clientErrorHandler (this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET') {
    socket.destroy()
    return
  }
  if (err.code === 'HPE_CLOSED_CONNECTION') return bytesAfterClose(socket, this.initialConfig.bodyLimit ?? 0)
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
  const reqId = newRequestId()
  if (!writeLastAnswer(socket, status, reqId)) return
  this.log.info({ ...edgeAccessFields(reqId, status), reason: 'malformed HTTP', code: err.code }, ACCESS_LINE)
}

// A URL that does not decode is answered before any hook runs: it closes the connection like every other answer
// to a malformed request, and what is pipelined behind it is dropped.
function closingFrameworkErrors (err: Error, request: FastifyRequest, reply: FastifyReply): void {
  if (!serveOneAtATime(request, reply)) return
  reply.header('connection', 'close')
  holdClosingAnswer(request, reply, undefined, () => { frameworkErrorHandler(err, request, reply) })
}

// Fixed when the instance is created, so app.ts passes them to Fastify().
export const connectionRuleOptions: Pick<FastifyServerOptions, 'clientErrorHandler' | 'frameworkErrors'> = { clientErrorHandler, frameworkErrors: closingFrameworkErrors }

async function connectionRules (fastify: FastifyInstance): Promise<void> {
  answerHalfClosedClients(fastify.server)
  fastify.addHook('onRequest', (request, reply, done) => { if (serveOneAtATime(request, reply)) done() })
  fastify.addHook('onSend', holdClosingAnswer)
  // Without a listener, Node destroys the socket of a CONNECT without a word.
  fastify.server.on('connect', (req: IncomingMessage, socket: Socket) => {
    const reqId = genReqId(req)
    if (!writeLastAnswer(socket, 400, reqId, 'CONNECT is not served: this service is not a proxy')) return
    fastify.log.info({ ...edgeAccessFields(reqId, 400, 'CONNECT'), reason: 'CONNECT is not served' }, ACCESS_LINE)
  })
  // Without a listener, Node answers an Expect other than 100-continue with an empty 417.
  fastify.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const reqId = genReqId(req)
    fastify.log.info({ ...edgeAccessFields(reqId, 417, req.method), expect: String(req.headers.expect).slice(0, 100) }, ACCESS_LINE)
    const { body, headers } = rawError(417, reqId, 'Only "Expect: 100-continue" is supported')
    res.writeHead(417, headers).end(body)
  })
  // With this listener Node leaves 100 Continue to the service, which sends it once auth, routing and the media
  // type have passed (requireJsonBody in plugins/json-body.ts).
  fastify.server.on('checkContinue', (req, res) => fastify.server.emit('request', req, res))
}

// Node needs httpAllowHalfOpen, a field it does not document, to answer a client that half-closes its side. It is
// checked, so that a Node without it fails at start-up rather than dropping answers.
export function answerHalfClosedClients (server: Server): void {
  const s = server as Server & { httpAllowHalfOpen?: unknown }
  if (typeof s.httpAllowHalfOpen !== 'boolean') {
    throw new Error('This Node\'s HTTP server has no httpAllowHalfOpen: a client that half-closes would lose its answer')
  }
  s.httpAllowHalfOpen = true
}

export default fp(connectionRules, { name: 'connection-rules', fastify: '5.x', dependencies: ['error-answers'] })
