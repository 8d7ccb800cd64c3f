import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { HttpError, rawError } from './errors.js'

// The connection edge: what is checked and answered before a request reaches
// a route (request ids, malformed HTTP, Host, Expect, answers given before
// the body was read).

// An incoming X-Request-Id is kept when it is short and plain, so a caller
// can follow its request through our logs; anything else gets a fresh id.
const acceptableRequestId = /^[A-Za-z0-9._:-]{1,128}$/

export function genReqId (req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && acceptableRequestId.test(incoming) ? incoming : randomUUID()
}

// Answers HTTP that Node's parser rejected before Fastify saw a request
// (bad request line, oversized headers, timeouts) in the Error shape, when
// the connection still allows an answer. Fastify calls it with the instance
// as `this`. No request was parsed, so the request id is a fresh one.
export function clientErrorHandler (this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  // As Node's own handler does: once an answer has started on this socket,
  // another one would corrupt the stream.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent === true) {
    socket.destroy()
    return
  }
  const status = err.code === 'HPE_HEADER_OVERFLOW'
    ? 431
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
  const reqId = randomUUID()
  this.log.info({ reqId, status, code: err.code }, 'malformed HTTP answered')
  const { body, headers } = rawError(status, reqId)
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${head}\r\n${body}`)
}

// An answer given before the request body has fully arrived (401, 415, 413
// are decided before reading it) ends the connection. Otherwise Node keeps
// reading the rest of the body on a keep-alive socket, and a client that
// stalls there hits requestTimeout and receives a second, unsolicited 408.
export function closeIfBodyUnread (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void {
  if (request.raw.complete === false) reply.header('connection', 'close')
  done(null, payload)
}

// Node answers an Expect other than 100-continue with an empty 417 of its
// own unless someone listens; this answers it in the Error shape.
export function answerUnmetExpectation (log: FastifyBaseLogger, req: IncomingMessage, res: ServerResponse): void {
  const reqId = genReqId(req)
  log.info({ reqId, status: 417, expect: String(req.headers.expect).slice(0, 100) }, 'request rejected')
  const { body, headers } = rawError(417, reqId, 'Only "Expect: 100-continue" is supported')
  res.writeHead(417, headers)
  res.end(body)
}

// HTTP/1.1 requires a Host header (RFC 9112 3.2). Node's own check answers
// with an empty 400, so it is turned off (src/app.ts) and made here.
export function requireHostHeader (request: FastifyRequest): void {
  const { httpVersionMajor, httpVersionMinor } = request.raw
  if (httpVersionMajor === 1 && httpVersionMinor >= 1 && request.headers.host === undefined) {
    throw new HttpError(400, 'An HTTP/1.1 request needs a Host header')
  }
}
