import http from 'node:http'
import net from 'node:net'

export interface HttpAnswer {
  status: number
  headers: http.IncomingHttpHeaders
  body: string
}

// One request over a real socket (through agent, so keep-alive can be shown).
export async function request (
  url: string,
  opts: { method?: string, headers?: Record<string, string>, body?: string, agent?: http.Agent, timeoutMs?: number } = {}
): Promise<HttpAnswer> {
  return await new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: opts.method ?? 'GET',
      headers: opts.headers,
      agent: opts.agent,
      timeout: opts.timeoutMs ?? 30_000
    }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${opts.timeoutMs ?? 30_000} ms`)))
    req.on('error', reject)
    req.end(opts.body)
  })
}

export interface RawExchange {
  // Everything the server sent before it ended the connection.
  response: string
  // How long until the server ended the connection.
  elapsedMs: number
  // The server ended the connection (its FIN, or a close).
  closedByServer: boolean
}

export interface Chunk { delayMs?: number, data: string | Buffer }

// Sends raw bytes, each chunk after the delay before it, and collects what
// comes back until the server ends the connection (or limitMs passes).
// Sending stops once the server closes, and unless keepSending, once it
// answers, as a real client's would. A halfOpen client sends the rest of its
// chunks after the server's FIN too, as a careless or hostile one does: the
// server discards them (a lingering close).
export async function rawExchange (port: number, chunks: Chunk[], limitMs: number, keepSending = false, halfOpen = false): Promise<RawExchange> {
  const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: halfOpen })
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  const start = Date.now()
  const received: Buffer[] = []
  let closed = false
  const done = new Promise<boolean>((resolve) => {
    const limit = setTimeout(() => resolve(false), limitMs)
    const ended = (): void => {
      clearTimeout(limit)
      resolve(true)
    }
    socket.on('data', (c: Buffer) => received.push(c))
    socket.on('error', () => {})
    socket.on('end', ended)
    socket.on('close', () => {
      closed = true
      ended()
    })
  })
  const send = async (): Promise<void> => {
    for (const { delayMs = 0, data } of chunks) {
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs))
      if (closed || socket.destroyed || (received.length > 0 && !keepSending)) return
      socket.write(data)
    }
  }
  const sending = send().catch(() => {})
  const closedByServer = await done
  const elapsedMs = Date.now() - start
  if (halfOpen) await sending
  socket.destroy()
  return { response: Buffer.concat(received).toString('latin1'), elapsedMs, closedByServer }
}

// Sends raw bytes, then half-closes: the client shuts down its side (FIN),
// as `nc -N` or `shutdown(SHUT_WR)` does, and goes on reading the answers
// until the server closes the connection (or limitMs passes).
export async function halfClosedExchange (port: number, data: string | Buffer, limitMs: number): Promise<RawExchange> {
  const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true })
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  const start = Date.now()
  const received: Buffer[] = []
  const closedByServer = await new Promise<boolean>((resolve) => {
    const limit = setTimeout(() => resolve(false), limitMs)
    socket.on('data', (c: Buffer) => received.push(c))
    socket.on('error', () => {})
    // The server's FIN: it has said everything it will.
    socket.on('end', () => {
      clearTimeout(limit)
      resolve(true)
    })
    socket.end(data)
  })
  const elapsedMs = Date.now() - start
  socket.destroy()
  return { response: Buffer.concat(received).toString('latin1'), elapsedMs, closedByServer }
}

// Splits a raw HTTP/1.1 response into status, headers and body.
export function parseRawResponse (raw: string): { status: number, headers: Record<string, string>, body: string } | undefined {
  const end = raw.indexOf('\r\n\r\n')
  if (end === -1) return undefined
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n')
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1])
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return { status, headers, body: raw.slice(end + 4) }
}

// Every final answer in a raw exchange, in order (interim 1xx answers left
// out), each body cut by its Content-Length and decoded as UTF-8.
export function parseAnswers (raw: string): Array<{ status: number, headers: Record<string, string>, body: string }> {
  const answers: Array<{ status: number, headers: Record<string, string>, body: string }> = []
  let rest = raw
  for (;;) {
    const res = parseRawResponse(rest)
    if (res === undefined || Number.isNaN(res.status)) return answers
    const headEnd = rest.indexOf('\r\n\r\n') + 4
    const length = res.status < 200 ? 0 : Number(res.headers['content-length'] ?? 0)
    const body = Buffer.from(rest.slice(headEnd, headEnd + length), 'latin1').toString('utf8')
    if (res.status >= 200) answers.push({ status: res.status, headers: res.headers, body })
    rest = rest.slice(headEnd + length)
  }
}

// The status codes of every final answer in a raw exchange, in order
// (interim 1xx answers left out), each answer's body skipped by its
// Content-Length.
export function answeredStatuses (raw: string): number[] {
  const statuses: number[] = []
  let rest = raw
  for (;;) {
    const res = parseRawResponse(rest)
    if (res === undefined || Number.isNaN(res.status)) return statuses
    const headEnd = rest.indexOf('\r\n\r\n') + 4
    const length = res.status < 200 ? 0 : Number(res.headers['content-length'] ?? 0)
    if (res.status >= 200) statuses.push(res.status)
    rest = rest.slice(headEnd + length)
  }
}
