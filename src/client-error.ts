import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'

// Answers HTTP that Node's parser rejected before Fastify saw a request
// (bad request line, oversized headers, timeouts) in the Error shape, when
// the connection still allows an answer.
export function clientErrorHandler (err: Error & { code?: string }, socket: Socket): void {
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
  const body = JSON.stringify({ error: status, message: STATUS_CODES[status] })
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' + body
  )
}

// An answer given before the request body has fully arrived (401, 415, 413
// are decided before reading it) ends the connection. Otherwise Node keeps
// reading the rest of the body on a keep-alive socket, and a client that
// stalls there hits requestTimeout and receives a second, unsolicited 408.
export function closeIfBodyUnread (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void {
  if (request.raw.complete === false) reply.header('connection', 'close')
  done(null, payload)
}
