import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { createTestDatabase, TOKEN, type BackendName, type Teardown } from '../helper.js'
import { startServerProcess, type SourceServer } from './processes.js'

// Creates sent the way the overload tests send them: each on a connection of
// its own, with the start of its answer's body kept to tell why a 503 was given.

export interface Answer { id: number, status: number, retryAfter: string | undefined, ms: number, message?: string }

// A create whose body is the given parts, sent as fast as the client can.
// Status 0: the connection ended before an answer arrived (a shed answer the
// close may destroy while the client still sends; its outcome is not claimed).
export async function sendCreate (url: string, id: number, parts: Buffer[], timeoutMs = 60_000): Promise<Answer> {
  const started = performance.now()
  return await new Promise((resolve) => {
    let answered = false
    const answer = (status: number, retryAfter?: string, message?: string): void => {
      if (answered) return
      answered = true
      resolve({ id, status, retryAfter, ms: performance.now() - started, message })
    }
    const req = http.request(`${url}/plants`, {
      method: 'POST',
      agent: false,
      timeout: timeoutMs,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json',
        'content-length': parts.reduce((n, p) => n + p.length, 0)
      }
    }, (res) => {
      const retryAfter = res.headers['retry-after']
      let text = ''
      res.on('data', (c: Buffer) => { if (text.length < 200) text += c.toString() })
      res.on('end', () => answer(res.statusCode ?? 0, retryAfter, text))
      res.on('error', () => answer(res.statusCode ?? 0, retryAfter))
    })
    req.on('timeout', () => req.destroy())
    req.on('error', () => answer(0))
    for (const part of parts.slice(0, -1)) req.write(part)
    req.end(parts.at(-1))
  })
}

// A create of a name of about nameBytes bytes (the id leads it, so each is its own).
const fillers = new Map<number, Buffer>()
export async function bigCreate (url: string, id: number, nameBytes = 1_000_000): Promise<Answer> {
  const filler = fillers.get(nameBytes) ?? Buffer.alloc(nameBytes, 'x')
  fillers.set(nameBytes, filler)
  return await sendCreate(url, id, [Buffer.from(`{"id":${id},"name":"${id} `), filler, Buffer.from('"}')])
}

// Answers by status, 503s by the reason their message gives.
export function tally (answers: Answer[]): string {
  const counts = new Map<string, number>()
  for (const a of answers) {
    const key = `${a.status}${a.status === 503 ? ` ${/\((.*)\)/.exec(a.message ?? '')?.[1] ?? 'database'}` : ''}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return [...counts].sort().map(([key, n]) => `${key}: ${n}`).join(', ')
}

// A create shed as overload, before its body was read (not a 503 of the database's).
export const shedUnread = (a: Answer): boolean => a.status === 503 && /The service is overloaded/.test(a.message ?? '')

// Resolves once GET /health/ready answers 200: on PostgreSQL the server
// listens before its migrations are applied, and a create before then is 503.
export async function untilReady (url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while ((await fetch(`${url}/health/ready`).then((r) => r.status, () => 0)) !== 200) {
    if (Date.now() > deadline) throw new Error(`${url} was not ready within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

// The service as a process of its own on a fresh database, ready for creates, stopped and dropped at teardown.
export async function startReadyServer (t: Teardown, backend: BackendName): Promise<SourceServer & { port: number }> {
  const testDb = await createTestDatabase(backend)
  t.teardown(() => testDb.drop())
  const server = await startServerProcess({ ...(testDb.url === undefined ? {} : { databaseUrl: testDb.url }), startTimeoutMs: 60_000 })
  t.teardown(() => server.stop())
  await untilReady(server.url)
  return Object.assign(server, { port: Number(new URL(server.url).port) })
}
