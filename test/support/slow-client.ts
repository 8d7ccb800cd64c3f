import net from 'node:net'
import { once } from 'node:events'

export interface SlowClient {
  // Resolves when the server closes the connection, with what it sent after
  // its 100 Continue.
  closed: Promise<{ response: string }>
  destroy(): void
}

const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'

// A hostile, slow uploader: a create whose headers promise a body that never
// fully arrives, so the request stays in flight until the server gives up on
// it. It resolves once the server has taken the request in (its 100 Continue
// comes after auth and the media-type check, as the body is about to be
// read), so a stop that follows is sure to find it in flight.
export async function openSlowUpload (port: number, token: string): Promise<SlowClient> {
  const socket = net.connect({ host: '127.0.0.1', port })
  await once(socket, 'connect')
  let received = ''
  socket.setEncoding('utf8')
  let continued!: () => void
  const accepted = new Promise<void>((resolve) => { continued = resolve })
  socket.on('data', (d: string) => {
    received += d
    if (received.startsWith(CONTINUE)) continued()
  })
  socket.on('error', () => {})
  const closed = new Promise<{ response: string }>((resolve) => socket.once('close', () => {
    continued()
    resolve({ response: received.startsWith(CONTINUE) ? received.slice(CONTINUE.length) : received })
  }))
  socket.write([
    'POST /plants HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${token}`,
    'Content-Type: application/json', 'Content-Length: 64', 'Expect: 100-continue', '', ''
  ].join('\r\n'))
  await accepted
  socket.write('{"id": 7, "na')
  return { closed, destroy: () => socket.destroy() }
}
