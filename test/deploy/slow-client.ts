import net from 'node:net'
import { once } from 'node:events'

export interface SlowClient {
  // Resolves when the server closes the connection, with what it sent.
  closed: Promise<{ response: string }>
  destroy(): void
}

// A hostile, slow uploader: a create whose headers promise a body that never
// fully arrives, so the request stays in flight until the server gives up on it.
export async function openSlowUpload (port: number, token: string): Promise<SlowClient> {
  const socket = net.connect({ host: '127.0.0.1', port })
  await once(socket, 'connect')
  let response = ''
  socket.setEncoding('utf8')
  socket.on('data', (d: string) => { response += d })
  socket.on('error', () => {})
  const closed = new Promise<{ response: string }>((resolve) => socket.once('close', () => resolve({ response })))
  socket.write([
    'POST /plants HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${token}`,
    'Content-Type: application/json', 'Content-Length: 64', '', '{"id": 7, "na'
  ].join('\r\n'))
  return { closed, destroy: () => socket.destroy() }
}
