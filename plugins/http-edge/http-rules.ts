import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RequestPayload } from 'fastify'
import { HttpError, notFoundHandler, rawError, sendError } from '../error-answers.js'
import { ACCESS_LINE, edgeAccessFields } from '../logging/access-log.js'
import { closeAfterAnswer, lingeringClose, writeClosingAnswer } from './connection-rules.js'
import { genReqId, newRequestId } from '../logging/request-ids.js'

// HTTP/1.1's rules that Node leaves to the server, or answers outside the
// Error shape: malformed HTTP, Host, transfer codings, Expect, CONNECT, and
// a request no route takes (404, or 405 with Allow).

// Answers HTTP that Node's parser rejected before Fastify saw a request
// (bad request line, oversized headers, timeouts). Fastify calls it with
// the instance as `this`. No request was parsed: the request id is fresh.
export function clientErrorHandler (this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET') {
    socket.destroy()
    return
  }
  // Closing already: what arrives is discarded (connection-rules.ts).
  if (!socket.writable) return
  const status = err.code === 'HPE_HEADER_OVERFLOW'
    ? 431
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
  const reqId = newRequestId()
  if (!writeClosingAnswer(socket, status, reqId)) return
  // Its access line: no method or route was parsed.
  this.log.info({ ...edgeAccessFields(reqId, status), reason: 'malformed HTTP', code: err.code }, ACCESS_LINE)
}

// CONNECT asks for a tunnel, which only a proxy gives. Node hands it, with
// the raw socket, to a 'connect' listener, or destroys the socket without a
// word when there is none.
export function refuseConnect (log: FastifyBaseLogger, req: IncomingMessage, socket: Socket): void {
  const reqId = genReqId(req)
  if (!writeClosingAnswer(socket, 400, reqId, 'CONNECT is not served: this service is not a proxy')) return
  log.info({ ...edgeAccessFields(reqId, 400, 'CONNECT'), reason: 'CONNECT is not served' }, ACCESS_LINE)
}

// RFC 9112 6.1: a transfer coding the server does not implement is answered
// 501, and the connection closed. Node's parser decodes chunked only (and
// refuses a request whose last coding is not chunked): a coding in front of
// it (gzip, chunked) would reach the JSON parser undecoded.
export function refuseUnknownTransferCoding (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const coding = request.headers['transfer-encoding']
  if (coding === undefined || /^[ \t]*chunked[ \t]*$/i.test(coding)) return done()
  request.log.info({ status: 501, transferEncoding: coding.slice(0, 100) }, 'request rejected')
  reply.header('connection', 'close')
  sendError(reply, 501, `Transfer-Encoding ${coding.slice(0, 100)} is not implemented: send the body as it is, or chunked`)
}

// HTTP/1.1 requires a Host header (RFC 9112 3.2). Node's own check answers
// with an empty 400, so it is turned off (server-options.ts) and made here.
export function requireHostHeader (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const { httpVersionMajor, httpVersionMinor } = request.raw
  if (httpVersionMajor === 1 && httpVersionMinor >= 1 && request.headers.host === undefined) {
    return done(new HttpError(400, 'An HTTP/1.1 request needs a Host header'))
  }
  done()
}

// Node answers Expect: 100-continue before any check unless someone listens
// for 'checkContinue' (index.ts does): the client is told to send its body
// only once auth, routing and the media type have passed. Any other Expect
// goes to answerUnmetExpectation, so one that gets here asked for 100 Continue.
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
  closeAfterAnswer(req.socket)
  res.once('finish', () => lingeringClose(req.socket))
  res.writeHead(417, headers)
  res.end(body)
}

// Routing comes first: a request no route takes is answered in onRequest,
// before auth and before its body is read (Fastify's 404 route would parse
// it). An API path (an operation of the OpenAPI document) answers another
// method 405 with Allow; anything else, 404. The body stays unread, so the
// connection closes (closeIfBodyUnread).
export function answerUnroutedBeforeBody (fastify: FastifyInstance): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  const methodsByPath = new Map<string, Set<string>>()
  fastify.addHook('onRoute', (route) => {
    const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId
    if (operationId === undefined || /[:*]/.test(route.url)) return
    const methods = methodsByPath.get(route.url) ?? new Set<string>()
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) methods.add(method)
    methodsByPath.set(route.url, methods)
  })
  return function answerUnrouted (request, reply, done) {
    if (!request.is404) return done()
    const allowed = methodsByPath.get(pathOf(request.url))
    notFoundHandler(request, reply, allowed === undefined ? undefined : [...allowed].sort())
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
