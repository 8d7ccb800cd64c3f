import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, RequestPayload } from 'fastify'
import { HttpError, notFoundHandler, rawError, sendError } from './error-answers.js'
import { ACCESS_LINE, edgeAccessFields } from './access-log.js'
import { afterEarlierAnswers, answerAndClose, stopReading, stoppedReading } from './connection.js'
import { genReqId, newRequestId } from './request-id.js'

// The connection edge: what is checked and answered before a request reaches
// a route (malformed HTTP, Host, route first, Expect, answers
// given before the body was read).

// Answers HTTP that Node's parser rejected before Fastify saw a request
// (bad request line, oversized headers, timeouts) in the Error shape, when
// the connection still allows an answer. Fastify calls it with the instance
// as `this`. No request was parsed, so the request id is a fresh one.
export function clientErrorHandler (this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable || stoppedReading(socket)) {
    socket.destroy()
    return
  }
  const status = err.code === 'HPE_HEADER_OVERFLOW'
    ? 431
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
  const reqId = newRequestId()
  // Its access line: no method or route was parsed.
  this.log.info({ ...edgeAccessFields(reqId, status), reason: 'malformed HTTP', code: err.code }, ACCESS_LINE)
  answerLastWhenFree(socket, status, reqId)
}

// CONNECT asks for a tunnel, which only a proxy gives. Node hands it, with
// the raw socket, to a 'connect' listener (index.ts), or
// destroys the socket without a word when there is none.
export function refuseConnect (log: FastifyBaseLogger, req: IncomingMessage, socket: Socket): void {
  const reqId = genReqId(req)
  log.info({ ...edgeAccessFields(reqId, 400, 'CONNECT'), reason: 'CONNECT is not served' }, ACCESS_LINE)
  answerLastWhenFree(socket, 400, reqId, 'CONNECT is not served: this service is not a proxy')
}

// The last answer on a connection Fastify does not handle, in the Error
// shape. Reading stops at once: whatever the client sends after this is
// never processed. Answers already under way for earlier pipelined requests
// go out first (a create that was stored keeps its answer); if one of them
// closes the connection, this answer is never sent.
function answerLastWhenFree (socket: Socket, status: number, reqId: string, message?: string): void {
  stopReading(socket)
  afterEarlierAnswers(socket, (incomplete) => {
    // An answer to the incomplete request has started: another one would
    // corrupt the stream.
    if (incomplete?.headersSent === true) {
      socket.destroy()
      return
    }
    const { body, headers } = rawError(status, reqId, message)
    const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')
    answerAndClose(socket, `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${head}\r\n${body}`)
  })
}

// RFC 9112 6.1: a transfer coding the server does not implement is answered
// 501, and the connection closed. Node's parser decodes chunked only (and
// refuses a request whose last coding is not chunked): a coding in front of
// it (gzip, chunked) would reach the JSON parser undecoded. Answered before
// the body is read. Returns true when it answered.
export function refuseUnknownTransferCoding (request: FastifyRequest, reply: FastifyReply): boolean {
  const coding = request.headers['transfer-encoding']
  if (coding === undefined || /^[ \t]*chunked[ \t]*$/i.test(coding)) return false
  request.log.info({ status: 501, transferEncoding: coding.slice(0, 100) }, 'request rejected')
  reply.header('connection', 'close')
  sendError(reply, 501, `Transfer-Encoding ${coding.slice(0, 100)} is not implemented: send the body as it is, or chunked`)
  return true
}

// An answer given before the request body has fully arrived (401, 415, 413
// are decided before reading it, 404 and 405 before routing to it) ends the
// connection. Otherwise Node keeps reading the rest of the body on a
// keep-alive socket, and a client that stalls there hits requestTimeout and
// receives a second, unsolicited 408. Any answer that ends the connection
// stops reading it at once: nothing sent after it is processed.
export function closeIfBodyUnread (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void {
  if (request.raw.complete === false) reply.header('connection', 'close')
  if (reply.getHeader('connection') === 'close' || !reply.raw.shouldKeepAlive) stopReading(request.raw.socket)
  done(null, payload)
}

// Node answers Expect: 100-continue itself, before any check, unless the
// server listens for 'checkContinue' (index.ts does). The
// client is told to send its body only when the body is about to be read:
// authentication, routing and the media type have passed. Node sends any
// other expectation to 'checkExpectation' (answerUnmetExpectation) and
// ignores Expect below HTTP/1.1, so an HTTP/1.1 request with an Expect
// header that gets here asked for 100 Continue.
export function continueWhenBodyWanted (request: FastifyRequest, reply: FastifyReply, payload: RequestPayload, done: (err: null, payload: RequestPayload) => void): void {
  const req = request.raw
  if (req.headers.expect !== undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1 && !reply.raw.headersSent) {
    reply.raw.writeContinue()
  }
  done(null, payload)
}

// Node answers an Expect other than 100-continue with an empty 417 of its
// own unless someone listens; this answers it in the Error shape.
export function answerUnmetExpectation (log: FastifyBaseLogger, req: IncomingMessage, res: ServerResponse): void {
  const reqId = genReqId(req)
  log.info({ ...edgeAccessFields(reqId, 417, req.method), expect: String(req.headers.expect).slice(0, 100) }, ACCESS_LINE)
  const { body, headers } = rawError(417, reqId, 'Only "Expect: 100-continue" is supported')
  stopReading(req.socket)
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

// Routing comes first: a request no route takes is answered in onRequest,
// before authentication and before a byte of its body is read (Fastify's
// own 404 route would read and parse the body first). A path of the API (a
// route that is an operation of the OpenAPI document, such as POST
// /plants) answers 405 with Allow to another method; any other request no
// route takes, 404 (the docs and probes are not an API to call otherwise).
// The answer leaves the body unread, so it closes the connection
// (closeIfBodyUnread).
export function routeFirst (fastify: FastifyInstance): (request: FastifyRequest, reply: FastifyReply) => FastifyReply | undefined {
  const methodsByPath = new Map<string, Set<string>>()
  fastify.addHook('onRoute', (route) => {
    const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId
    if (operationId === undefined || /[:*]/.test(route.url)) return
    const methods = methodsByPath.get(route.url) ?? new Set<string>()
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) methods.add(method)
    methodsByPath.set(route.url, methods)
  })
  return (request, reply) => {
    if (!request.is404) return undefined
    const allowed = methodsByPath.get(pathOf(request.url))
    notFoundHandler(request, reply, allowed === undefined ? undefined : [...allowed].sort())
    return reply
  }
}

function pathOf (url: string): string {
  const path = url.split('?')[0] ?? ''
  try {
    return decodeURIComponent(path)
  } catch {
    return path
  }
}
