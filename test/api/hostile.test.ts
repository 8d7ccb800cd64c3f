import t, { type Test } from 'tap'
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { assertErrorShape, buildTestApp, forEachBackend, jsonHeaders, listeningTestApp, postPlant, TOKEN, type BackendName } from '../helper.js'
import { carriesValidToken, fuzzRequestArb, type FuzzRequest } from '../support/fuzz-requests.js'
import { halfClosedExchange, parseAnswers, rawExchange, type Chunk, type RawExchange } from '../support/http.js'
import { sleep } from '../support/postgres.js'
import { fuzzRuns } from '../support/fuzz.js'

const FUZZ_RUNS = fuzzRuns(10_000)
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

interface HostileApp {
  app: FastifyInstance
  rows(): Promise<Map<string, { name: string, tag: string | null }>>
}

// The test app, with its rows keyed by id for look-ups.
async function hostileApp (t: Test, backend: BackendName): Promise<HostileApp> {
  const { app, rows } = await buildTestApp(t, backend)
  return { app, rows: async () => new Map((await rows()).map((r) => [r.id, r])) }
}

// The exact integer a JSON number denotes, as decimal text, when it is whole.
function wholeValue (text: string): string | undefined {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text)
  if (m === null) return undefined
  const [, sign, int, frac = '', exp = '0'] = m
  const e = Number(exp) - frac.length
  let digits = BigInt((int as string) + frac)
  if (e >= 0) digits *= 10n ** BigInt(e)
  else if (digits % 10n ** BigInt(-e) !== 0n) return undefined
  else digits /= 10n ** BigInt(-e)
  return (sign === '-' ? -digits : digits).toString()
}

const protoSnapshot = (): string => JSON.stringify([Object.prototype, Array.prototype, Function.prototype, String.prototype]
  .map((p) => Object.getOwnPropertyNames(p).sort()))

// Checks one answer against the contract; returns what is wrong, if anything.
function judge (req: FuzzRequest, res: { statusCode: number, headers: Record<string, unknown>, body: string }): string | undefined {
  const status = res.statusCode
  if (status >= 500) return `status ${status}: ${res.body}`
  if (!String(res.headers['content-type']).startsWith('application/json')) return `content-type ${String(res.headers['content-type'])}`
  let body: Record<string, unknown>
  try {
    body = JSON.parse(res.body) as Record<string, unknown>
  } catch {
    return `body is not JSON: ${res.body.slice(0, 100)}`
  }
  const isCreate = req.method === 'POST' && (req.url === '/plants' || req.url.startsWith('/plants?'))
  if (status === 200) {
    if (req.method === 'GET' && req.url === '/health/live') return undefined
    if (!isCreate) return `200 on ${req.method} ${req.url}`
    if (!carriesValidToken(req.authorization)) return `200 without a valid token (${String(req.authorization)})`
    const keys = Object.keys(body)
    if (typeof body.name !== 'string' || keys.some((k) => k !== 'name' && k !== 'tag') || ('tag' in body && typeof body.tag !== 'string')) {
      return `200 with a body that is not a Plant: ${res.body}`
    }
    return undefined
  }
  const keys = Object.keys(body).sort().join(',')
  if (keys !== 'error,message' || body.error !== status || typeof body.message !== 'string' || body.message.length === 0) {
    return `not the Error shape: ${res.body}`
  }
  if (isCreate) {
    const valid = carriesValidToken(req.authorization)
    if (!valid && status !== 401) return `${status} where 401 was due (${String(req.authorization)})`
    if (valid && ![400, 409, 413, 415].includes(status)) return `${status} for an authorised create`
    if (status === 401 && typeof res.headers['www-authenticate'] !== 'string') return '401 without WWW-Authenticate'
  }
  return undefined
}

async function injectTests (t: Test, h: HostileApp): Promise<void> {
  const { app } = h

  await t.test(`a fuzz of ${FUZZ_RUNS} generated requests: never a 5xx, always a Plant or the Error shape`, async (t) => {
    const before = protoSnapshot()
    const acknowledged = new Map<string, string>()
    const statuses = new Map<number, number>()
    let runs = 0
    const started = performance.now()
    try {
      await fc.assert(fc.asyncProperty(fuzzRequestArb, async (req) => {
        runs++
        const headers: Record<string, string> = {}
        if (req.authorization !== undefined) headers.authorization = req.authorization
        if (req.contentType !== undefined) headers['content-type'] = req.contentType
        const res = await app.inject({ method: req.method as 'POST', url: req.url, headers, ...(req.payload === undefined ? {} : { payload: req.payload }) })
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
        const wrong = judge(req, res)
        if (wrong !== undefined) throw new Error(wrong)
        const id = req.id === undefined ? undefined : wholeValue(req.id)
        if (res.statusCode === 200 && id !== undefined && req.method === 'POST' && req.url.startsWith('/plants')) acknowledged.set(id, res.body)
      }), { numRuns: FUZZ_RUNS })
    } catch (err) {
      t.fail(String((err as Error).message).slice(0, 3000))
    }
    const ms = performance.now() - started
    t.ok(runs >= FUZZ_RUNS, `${runs} generated requests`)
    t.equal(protoSnapshot(), before, 'no prototype gained or lost a property')

    const rows = await h.rows()
    const mismatched = [...acknowledged].filter(([id, body]) => {
      const row = rows.get(id)
      return row === undefined || body !== JSON.stringify(row.tag === null ? { name: row.name } : { name: row.name, tag: row.tag })
    })
    t.same(mismatched, [], `each of ${acknowledged.size} acknowledged ids answered the stored row`)
    const byStatus = [...statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}:${n}`).join(' ')
    t.comment(`figures: fuzz runs=${runs} ms=${Math.round(ms)} statuses ${byStatus}`)
  })

  await t.test('JSON nested 100,000 levels deep answers 400 quickly', async (t) => {
    const depth = 100_000
    const bodies = [
      '['.repeat(depth) + ']'.repeat(depth),
      '{"a":'.repeat(depth) + '1' + '}'.repeat(depth),
      `{"id": 1, "name": "deep", "x": ${'['.repeat(depth)}${']'.repeat(depth)}}`,
      '['.repeat(depth)
    ]
    for (const body of bodies) {
      const start = performance.now()
      const res = await postPlant(app, body)
      const ms = performance.now() - start
      assertErrorShape(t, res, 400)
      t.ok(ms < 2000, `answered in ${Math.round(ms)} ms`)
    }
    t.equal((await postPlant(app, '{"id": 100001, "name": "after deep"}')).statusCode, 200, 'the service still works')
  })

  await t.test('a body of 100,000 keys is handled in time', async (t) => {
    const keys = Array.from({ length: 100_000 }, (_, i) => `"k${i.toString(36)}":0`)
    const body = `{"id": 100002, "name": "many keys", ${keys.join(',')}}`
    t.ok(Buffer.byteLength(body) < 1048576, 'under the body limit')
    let start = performance.now()
    const res = await postPlant(app, body)
    t.equal(res.statusCode, 200, 'unknown properties are accepted')
    t.equal(res.body, '{"name":"many keys"}', 'and neither stored nor echoed')
    t.ok(performance.now() - start < 5000, `answered in ${Math.round(performance.now() - start)} ms`)

    start = performance.now()
    const dup = await postPlant(app, `{"id": 100003, "name": "dup", ${keys.join(',')}, "k0": 1}`)
    assertErrorShape(t, dup, 400)
    t.ok(performance.now() - start < 5000, `a repeated key among them: 400 in ${Math.round(performance.now() - start)} ms`)
  })

  await t.test('__proto__ and constructor.prototype payloads pollute nothing', async (t) => {
    const before = protoSnapshot()
    const cases: Array<[string, number, string]> = [
      ['{"id": 100010, "name": "p", "__proto__": {"polluted": "yes", "tag": "injected"}}', 200, '{"name":"p"}'],
      ['{"id": 100011, "name": "p", "constructor": {"prototype": {"polluted": "yes"}}}', 200, '{"name":"p"}'],
      ['{"id": 100012, "name": "p", "a": {"__proto__": {"polluted": "yes"}}, "b": [{"constructor": {"prototype": {"polluted": "yes"}}}]}', 200, '{"name":"p"}'],
      ['{"id": 100013, "name": "p", "__proto__": null, "constructor": null}', 200, '{"name":"p"}'],
      ['{"id": 100014, "__proto__": {"name": "from the prototype"}}', 400, ''],
      ['{"__proto__": {"id": 100015, "name": "from the prototype"}}', 400, ''],
      ['{"id": 100016, "name": "p", "__proto__": {"polluted": 1}, "__proto__": {"polluted": 2}}', 400, '']
    ]
    for (const [body, status, plant] of cases) {
      const res = await postPlant(app, body)
      if (status === 200) t.same([res.statusCode, res.body], [200, plant], body)
      else assertErrorShape(t, res, status)
    }
    const rows = await h.rows()
    t.same(rows.get('100010'), { id: '100010', name: 'p', tag: null }, 'a tag under __proto__ is not the tag')
    t.notOk(rows.has('100014') || rows.has('100015'), 'fields under __proto__ are not fields')
    t.equal(({} as Record<string, unknown>).polluted, undefined, 'a fresh object has no polluted property')
    t.equal(protoSnapshot(), before, 'no prototype gained or lost a property')
  })

  await t.test('a very long token is refused with 401', async (t) => {
    for (const token of ['a'.repeat(1 << 20), TOKEN + 'a'.repeat(1 << 20)]) {
      const start = performance.now()
      const res = await postPlant(app, '{"id": 1, "name": "x"}', jsonHeaders(token))
      assertErrorShape(t, res, 401)
      t.match(res.headers['www-authenticate'], /error="invalid_token"/)
      t.ok(performance.now() - start < 1000, `in ${Math.round(performance.now() - start)} ms`)
    }
  })
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

forEachBackend(t, 'hostile input', async (t, backend) => {
  const h = await hostileApp(t, backend)
  await injectTests(t, h)
})
forEachBackend(t, 'hostile connections', async (t, backend) => {
  await socketTests(t, backend)
})
