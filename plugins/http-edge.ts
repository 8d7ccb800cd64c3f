import fp from 'fastify-plugin'
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import type { FastifyError, FastifyHttpOptions, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Config } from '../src/config.js'
import { HttpError, rawError, RETRY_AFTER_SECONDS, retryAfter } from '../src/http-error.js'
import { ACCESS_LINE, edgeAccessFields, genReqId, newRequestId } from './access-log.js'
import { notFound } from './error-answers.js'

// The connection rules and what HTTP/1.1 leaves to the server (docs/architecture.md).

// Headers (slowloris), then the whole request, must arrive in time. Keep-alive
// outlasts common load balancers' 60 s, so they close first. A connection
// silent while a request is open waits longer than a create can take (docs/api.md).
const TIMEOUTS = { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 65_000, checkIntervalMs: 1_000 }
export type ServerTimeouts = typeof TIMEOUTS & { connectionTimeoutMs: number }

export function serverTimeouts (config: Pick<Config, 'dbTimeoutMs'>, overrides: Partial<ServerTimeouts> = {}): ServerTimeouts {
  return { ...TIMEOUTS, connectionTimeoutMs: Math.max(60_000, 4 * config.dbTimeoutMs + 10_000), ...overrides }
}

// Node's default, stated: a larger header block gets 431.
export const MAX_HEADER_BYTES = 16 * 1024

export function edgeOptions (config: Config, timeouts?: Partial<ServerTimeouts>): FastifyHttpOptions<Server> {
  const t = serverTimeouts(config, timeouts)
  return {
    bodyLimit: config.bodyLimit,
    clientErrorHandler,
    // Fastify sets these three on the server it creates with `http`.
    requestTimeout: t.requestTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    connectionTimeout: t.connectionTimeoutMs,
    http: {
      headersTimeout: t.headersTimeoutMs,
      connectionsCheckingInterval: t.checkIntervalMs,
      maxHeaderSize: MAX_HEADER_BYTES,
      // Node's Host check answers with an empty body: framingError does it.
      requireHostHeader: false
    },
    // Opening embedded PGlite compiles WebAssembly and runs initdb: seconds.
    pluginTimeout: 60_000,
    // Fastify's own 503 during close has a body outside the contract: the edge answers instead.
    return503OnClosing: false,
    forceCloseConnections: 'idle'
  }
}

// How long a client may go on sending (up to twice BODY_LIMIT) once its answer is ready.
export const LINGER_MS = 2_000

// The response under way on each connection, to tell a pipelined request.
const answering = new WeakMap<Socket, ServerResponse>()
// Until discarded, what a client still sends behind the request being answered.
const stillSending = new WeakMap<Socket, Promise<void>>()

function holdFor (socket: Socket, read: Promise<void>): void {
  stillSending.set(socket, Promise.all([stillSending.get(socket), read]).then(() => {}))
}

// A request that arrives before the answer to the one before it is written, or after an answer
// that closes, is dropped unprocessed; the connection closes after the answer (RFC 9112 9.3.2).
function serveOneAtATime (request: FastifyRequest, reply: FastifyReply): boolean {
  const socket = request.raw.socket
  // app.inject's requests have a stand-in, not a socket.
  if (!(socket instanceof Socket)) return true
  const previous = answering.get(socket)
  if (socket.writable && (previous === undefined || previous.writableFinished)) {
    answering.set(socket, reply.raw)
    return true
  }
  request.log.info('request dropped unprocessed: it arrived before the answer to the one before it was written')
  reply.hijack()
  holdFor(socket, bodyRead(request))
  if (previous !== undefined && !previous.writableFinished) closeAfter(previous, socket)
  return false
}

// An answer given while the client still sends closes the connection once
// those bytes are discarded: a FIN, not a reset that could destroy the answer
// (RFC 9112 9.6). A client waiting for 100 Continue sends no body.
function holdClosingAnswer (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void {
  const req = request.raw
  const unread = req.complete === false && req.headers.expect === undefined
  const behind = stillSending.get(req.socket as Socket)
  if (req.complete === false) reply.header('connection', 'close')
  if (!unread && behind === undefined) return done(null, payload)
  Promise.all([behind, unread ? bodyRead(request) : undefined]).then(() => done(null, payload), () => done(null, payload))
}

// Or past LINGER_MS or twice BODY_LIMIT, when the client may be reset after all.
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

// Closes once res is written: by Connection: close while its head can say
// so (Node then ends the socket), else by endGracefully.
function closeAfter (res: ServerResponse, socket: Socket): void {
  if (!res.headersSent) res.setHeader('connection', 'close')
  else res.once('finish', () => endGracefully(socket))
}

// Ends the server's side, then discards what the client still sends until it
// closes or LINGER_MS pass: unread bytes would make the close a reset.
function endGracefully (socket: Socket, last = ''): void {
  socket.end(last)
  socket.resume()
  setTimeout(() => socket.destroy(), LINGER_MS).unref()
}

// Written outside Fastify; not (false) when closing already, when a complete
// request's answer is under way (a stored create keeps it), or when an
// incomplete request's answer has begun (a second would corrupt the stream).
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
    // Answered here: the rest of its body is left unread, so never processed.
    res.req.pause()
  }
  const { body, headers } = rawError(status, reqId, message)
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  endGracefully(socket, `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${head}\r\n${body}`)
  return true
}

// Bytes after Connection: close hold the answer until IDLE_MS pass without a
// chunk (a sender a busy machine holds up is not done), or past LINGER_MS or
// twice BODY_LIMIT since the first.
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

// HTTP that Node's parser rejected: no request was parsed, so the id is fresh.
function clientErrorHandler (this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET') {
    socket.destroy()
    return
  }
  // Node's parser refuses each chunk sent after Connection: close.
  if (err.code === 'HPE_CLOSED_CONNECTION') return bytesAfterClose(socket, this.initialConfig.bodyLimit ?? 0)
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
  const reqId = newRequestId()
  if (!writeLastAnswer(socket, status, reqId)) return
  this.log.info({ ...edgeAccessFields(reqId, status), reason: 'malformed HTTP', code: err.code }, ACCESS_LINE)
}

const CLOSE = { connection: 'close' }

// RFC 9110 6.2, RFC 9112 3.2 and 6.1: Node decodes chunked only, so a coding
// in front of it would reach the JSON reader undecoded.
function framingError (req: IncomingMessage): HttpError | undefined {
  if (req.httpVersionMajor !== 1 || req.httpVersionMinor > 1) {
    return new HttpError(505, `HTTP/${req.httpVersion.slice(0, 10)} is not supported: send HTTP/1.1`, CLOSE)
  }
  let hosts = 0
  const raw = req.rawHeaders
  for (let i = 0; i < raw.length; i += 2) if ((raw[i] as string).length === 4 && (raw[i] as string).toLowerCase() === 'host') hosts++
  if (hosts > 1) return new HttpError(400, 'The request has more than one Host header', CLOSE)
  const host = req.headers.host
  if (host === undefined ? req.httpVersionMinor === 1 : !VALID_HOST.test(host)) {
    return new HttpError(400, host === undefined ? 'An HTTP/1.1 request needs a Host header' : 'The Host header is not a valid host[:port]', CLOSE)
  }
  const coding = req.headers['transfer-encoding']
  if (coding !== undefined && !/^[ \t]*chunked[ \t]*$/i.test(coding)) {
    return new HttpError(501, `Transfer-Encoding ${coding.slice(0, 100)} is not implemented: send the body as it is, or chunked`, CLOSE)
  }
  return undefined
}

// uri-host [ ":" port ]: an IP literal, or a reg-name of unreserved, sub-delims and %-escapes.
const VALID_HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]*)(?::[0-9]*)?$/

// Before auth and the body (Fastify's 404 route would parse it): 405 with
// Allow on an API path (an operationId's), else 404.
function routingRule (fastify: FastifyInstance): (request: FastifyRequest) => HttpError | undefined {
  const methodsByPath = new Map<string, string[]>()
  fastify.addHook('onRoute', (route) => {
    const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId
    if (operationId === undefined || /[:*]/.test(route.url)) return
    const methods = [...(methodsByPath.get(route.url) ?? []), ...[route.method].flat()]
    methodsByPath.set(route.url, methods.sort())
  })
  return (request) => {
    if (!request.is404) return undefined
    const path = request.url.split('?')[0] ?? ''
    let decoded = path
    try {
      decoded = decodeURIComponent(path)
    } catch {}
    const allowed = methodsByPath.get(decoded)
    if (allowed === undefined) return notFound(request)
    return new HttpError(405, `Method ${request.method.slice(0, 20)} is not allowed on ${path.slice(0, 100)}; use ${allowed.join(' or ')}`,
      { allow: allowed.join(', ') })
  }
}

async function httpEdge (fastify: FastifyInstance): Promise<void> {
  answerHalfClosedClients(fastify.server)
  const unrouted = routingRule(fastify)
  // Once close has begun, a request on a kept-alive connection is refused, so the drain ends.
  let closing = false
  fastify.addHook('preClose', async () => { closing = true })
  fastify.addHook('onSend', holdClosingAnswer)
  fastify.addHook('onRequest', function edge (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) {
    reply.header('x-request-id', request.id).header('x-content-type-options', 'nosniff')
    if (!serveOneAtATime(request, reply)) return
    const refused = framingError(request.raw) ?? unrouted(request) ??
      (closing ? new HttpError(503, 'The service is shutting down; retry later', { ...CLOSE, ...retryAfter(RETRY_AFTER_SECONDS.shuttingDown) }) : undefined)
    done(refused as FastifyError | undefined)
  })
  // Without a listener Node destroys a CONNECT's socket without a word.
  fastify.server.on('connect', (req: IncomingMessage, socket: Socket) => {
    const reqId = genReqId(req)
    if (!writeLastAnswer(socket, 400, reqId, 'CONNECT is not served: this service is not a proxy')) return
    fastify.log.info({ ...edgeAccessFields(reqId, 400, 'CONNECT'), reason: 'CONNECT is not served' }, ACCESS_LINE)
  })
  // Without a listener Node answers an Expect other than 100-continue with an empty 417.
  fastify.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const reqId = genReqId(req)
    fastify.log.info({ ...edgeAccessFields(reqId, 417, req.method), expect: String(req.headers.expect).slice(0, 100) }, ACCESS_LINE)
    const { body, headers } = rawError(417, reqId, 'Only "Expect: 100-continue" is supported')
    res.writeHead(417, headers).end(body)
  })
  // With a listener Node leaves 100 Continue to the service (requireJsonBody in plugins/json-body.ts).
  fastify.server.on('checkContinue', (req, res) => fastify.server.emit('request', req, res))
}

// Node needs httpAllowHalfOpen, which it does not document, to answer a
// client that half-closes: checked, so a Node without it fails at start-up.
export function answerHalfClosedClients (server: Server): void {
  const s = server as Server & { httpAllowHalfOpen?: unknown }
  if (typeof s.httpAllowHalfOpen !== 'boolean') {
    throw new Error('This Node\'s HTTP server has no httpAllowHalfOpen: a client that half-closes would lose its answer')
  }
  s.httpAllowHalfOpen = true
}

export default fp(httpEdge, { name: 'http-edge', fastify: '5.x', dependencies: ['error-answers'] })
