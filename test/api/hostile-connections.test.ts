import t, { type Test } from 'tap'
import fc from 'fast-check'
import { forEachBackend, listeningTestApp, TOKEN, type BackendName } from '../helper.js'
import { fuzzRequestArb, judge, wholeValue, type FuzzRequest } from '../support/fuzz-requests.js'
import { halfClosedExchange, parseAnswers, rawExchange, type Chunk, type RawExchange } from '../support/http.js'
import { sleep } from '../support/postgres.js'
import { fuzzRuns } from '../support/fuzz.js'

// Hostile connections: generated requests, creates of our own and bytes that are not HTTP, pipelined, in one
// packet, cut up or half-closed, over real sockets. What each create was told is what was stored. (Hostile input
// through app.inject is test/api/hostile.test.ts.)

const SOCKET_FUZZ_RUNS = fuzzRuns(300)
const SOCKETS_AT_ONCE = 8

// Runs fn on every item, at most `width` at a time; the first error is thrown once all have ended.
async function inTurns<T> (items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const errors: unknown[] = []
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await fn(items[next++] as T).catch((err: unknown) => { errors.push(err) })
  }))
  if (errors.length > 0) throw errors[0]
}

// What goes on the wire in the socket fuzz: a create of our own under an
// id no other request uses (so what it was told can be compared with what
// was stored), a generated request, or bytes that are not HTTP at all.
type Wire =
  | { kind: 'tracked', name: string, close: boolean }
  | { kind: 'fuzz', req: FuzzRequest }
  | { kind: 'garbage', bytes: string }

const wireArb: fc.Arbitrary<Wire> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ name: fc.constantFrom('fern', '\ufeffbom', '\ufeff', 'ü\u0301', '', '\u{10ffff}'), close: fc.integer({ min: 0, max: 6 }).map((n) => n === 0) }).map((r) => ({ kind: 'tracked' as const, ...r })) },
  { weight: 4, arbitrary: fuzzRequestArb.map((req) => ({ kind: 'fuzz' as const, req })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('GARBAGE\r\n\r\n', 'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
      'PUT /plants HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n', 'GET / HTTP/9.9\r\n\r\n')
      .map((bytes) => ({ kind: 'garbage' as const, bytes }))
  }
)

// How the bytes arrive: all in one packet, each request in its own write,
// cut at arbitrary places, or in one packet followed by the client's FIN.
const shapeArb = fc.oneof(
  fc.constant({ shape: 'one packet' as const }),
  fc.constant({ shape: 'pipelined' as const }),
  fc.array(fc.nat(), { minLength: 1, maxLength: 3 }).map((cuts) => ({ shape: 'split' as const, cuts })),
  fc.constant({ shape: 'half-closed' as const })
)

function httpRequest (req: FuzzRequest, extra: string[] = []): Buffer {
  const body = req.payload === undefined ? Buffer.alloc(0) : Buffer.isBuffer(req.payload) ? req.payload : Buffer.from(req.payload)
  const lines = [`${req.method} ${req.url} HTTP/1.1`, 'Host: localhost']
  if (req.authorization !== undefined) lines.push(`Authorization: ${req.authorization}`)
  if (req.contentType !== undefined) lines.push(`Content-Type: ${req.contentType}`)
  lines.push(`Content-Length: ${body.length}`, ...extra)
  return Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1'), body])
}

const hexOf = (text: string | undefined | null): string | null => text === undefined || text === null ? null : Buffer.from(text, 'utf8').toString('hex')

// Bytes stored, as hex: no decoder between the row and the comparison.
const STORED_HEX_SQL = "SELECT id::text AS id, encode(convert_to(name, 'UTF8'), 'hex') AS name, " +
  "CASE WHEN tag IS NULL THEN NULL ELSE encode(convert_to(tag, 'UTF8'), 'hex') END AS tag FROM plants"

async function exchange (port: number, packets: Buffer[], shape: { shape: string, cuts?: number[] }): Promise<RawExchange> {
  const all = Buffer.concat(packets)
  if (shape.shape === 'half-closed') return await halfClosedExchange(port, all, 5000)
  let chunks: Chunk[] = [{ data: all }]
  if (shape.shape === 'pipelined') chunks = packets.map((data, i) => ({ data, delayMs: i === 0 ? 0 : 2 }))
  if (shape.shape === 'split') {
    const at = [...new Set((shape.cuts ?? []).map((c) => c % all.length))].sort((a, b) => a - b)
    chunks = [0, ...at].map((from, i) => ({ data: all.subarray(from, at[i] ?? all.length), delayMs: i === 0 ? 0 : 2 }))
  }
  return await rawExchange(port, chunks, 5000, true)
}

async function socketTests (t: Test, backend: BackendName): Promise<void> {
  const { app, port } = await listeningTestApp(t, backend)
  // Ids of our own creates: far from any the generated requests use.
  let nextId = 7_000_000_000_000n
  const tracked = new Map<string, string>()
  const toldStored = new Set<string>()
  const acknowledged = new Map<string, { name: string, tag?: string }>()
  const shapes = new Map<string, number>()
  const runOf = new Map<string, string>()
  const behindClose = new Set<string>()
  let requests = 0
  let answered = 0

  await t.test(`a fuzz of ${SOCKET_FUZZ_RUNS} connections, pipelined, in one packet, cut up or half-closed: what each request was told is what was stored`, async (t) => {
    try {
      // Several connections at once, as a server meets them: the runs share nothing but the server.
      const runs = fc.sample(fc.tuple(fc.array(wireArb, { minLength: 1, maxLength: 6 }), shapeArb), SOCKET_FUZZ_RUNS)
      await inTurns(runs, SOCKETS_AT_ONCE, async ([wires, shape]) => {
        const ids = wires.map((w) => w.kind === 'tracked' ? (nextId++).toString() : undefined)
        const packets = wires.map((w, i) => {
          if (w.kind === 'garbage') return Buffer.from(w.bytes, 'latin1')
          if (w.kind === 'fuzz') return httpRequest(w.req)
          const id = ids[i] as string
          tracked.set(id, w.name)
          const body = `{"id": ${id}, "name": ${JSON.stringify(w.name)}}`
          return httpRequest({ method: 'POST', url: '/plants', authorization: `Bearer ${TOKEN}`, contentType: 'application/json', payload: body }, w.close ? ['Connection: close'] : [])
        })
        packets.push(Buffer.from('GET /health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'))
        // A client that asked for the close sends nothing after it (RFC 9112 9.6): what it
        // sends later may reach a closed socket, and the reset can destroy its own answer.
        // In one packet (or before the FIN) those bytes arrive first: never processed.
        const asked = wires.findIndex((w) => w.kind === 'tracked' && w.close)
        if (asked !== -1 && (shape.shape === 'pipelined' || shape.shape === 'split')) packets.splice(asked + 1)
        shapes.set(shape.shape, (shapes.get(shape.shape) ?? 0) + 1)
        requests += packets.length
        const out = await exchange(port, packets, shape)
        if (!out.closedByServer) throw new Error(`${shape.shape}: the connection was not closed`)
        const answers = parseAnswers(out.response)
        for (const id of ids) if (id !== undefined) runOf.set(id, `${shape.shape}, answers ${JSON.stringify(answers.map((a) => a.status))}: ${JSON.stringify(Buffer.concat(packets).toString('latin1').slice(0, 1000))}`)
        // Where the connection was closed for sure: a request that asked
        // for it, bytes that are not HTTP, an answer that said so. Nothing
        // after that may be processed.
        const closedAt = wires.findIndex((w, i) => (w.kind === 'tracked' && w.close) || w.kind === 'garbage' || answers[i]?.headers.connection === 'close')
        if (closedAt !== -1) for (const id of ids.slice(closedAt + 1)) if (id !== undefined) behindClose.add(id)
        answered += answers.length
        if (answers.length > packets.length) throw new Error(`${answers.length} answers to ${packets.length} requests`)
        for (const [i, res] of answers.entries()) {
          const w = wires[i]
          if (w === undefined) continue
          if (w.kind === 'tracked') {
            if (res.status !== 200) throw new Error(`${shape.shape}: a valid create answered ${res.status} ${res.body}`)
            toldStored.add(ids[i] as string)
          } else if (w.kind === 'fuzz') {
            const wrong = judge(w.req, { statusCode: res.status, headers: res.headers, body: res.body })
            if (wrong !== undefined) throw new Error(`${shape.shape}: ${wrong}`)
            const id = w.req.id === undefined ? undefined : wholeValue(w.req.id)
            if (res.status === 200 && id !== undefined && w.req.method === 'POST') acknowledged.set(id, JSON.parse(res.body) as { name: string, tag?: string })
          } else if (res.status < 400 || res.status >= 500 || !/^\{"error":\d{3},"message":"/.test(res.body)) {
            if (res.status !== 501) throw new Error(`${shape.shape}: garbage answered ${res.status} ${res.body}`)
          }
        }
      })
    } catch (err) {
      t.fail(String((err as Error).message).slice(0, 3000))
    }
    await sleep(500)
    const rows = new Map((await app.db.query<{ id: string, name: string, tag: string | null }>(STORED_HEX_SQL)).map((r) => [r.id, r]))
    const storedTracked = [...tracked.keys()].filter((id) => rows.has(id))
    t.same(storedTracked.filter((id) => behindClose.has(id)).map((id) => `${id}: ${runOf.get(id) ?? ''}`), [],
      `none of the ${behindClose.size} creates sent after the connection was closed was stored`)
    // Served one at a time: a request pipelined behind another is never
    // processed, so no create is stored without its answer.
    const unanswered = storedTracked.filter((id) => !toldStored.has(id))
    t.same(unanswered.map((id) => `${id}: ${runOf.get(id) ?? ''}`), [], 'no create was stored without its answer')
    t.same([...toldStored].filter((id) => !rows.has(id)), [], 'every create answered 200 was stored')
    t.same([...toldStored].filter((id) => rows.get(id)?.name !== hexOf(tracked.get(id))), [], 'exactly as sent')
    t.same([...acknowledged].filter(([id, plant]) => {
      const row = rows.get(id)
      return row === undefined || row.name !== hexOf(plant.name) || row.tag !== hexOf(plant.tag)
    }), [], `each of ${acknowledged.size} generated creates answered 200 answered the stored row`)
    t.comment(`figures: socket fuzz ${SOCKET_FUZZ_RUNS} connections, ${requests} requests, ${answered} answered; ` +
      `${tracked.size} tracked creates, ${toldStored.size} answered 200 and stored, ${unanswered.length} stored unanswered, ` +
      `${behindClose.size} sent after a close; shapes ${JSON.stringify(Object.fromEntries(shapes))}`)
  })
}

forEachBackend(t, 'hostile connections', async (t, backend) => {
  await socketTests(t, backend)
})
