import t, { type Test } from 'tap'
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { assertErrorShape, buildTestApp, forEachBackend, jsonHeaders, postPlant, TOKEN, type BackendName } from '../helper.js'
import { fuzzRequestArb, judge, wholeValue } from '../support/fuzz-requests.js'
import { fuzzRuns } from '../support/fuzz.js'

const FUZZ_RUNS = fuzzRuns(10_000)

interface HostileApp {
  app: FastifyInstance
  rows(): Promise<Map<string, { name: string, tag: string | null }>>
}

// The test app, with its rows keyed by id for look-ups.
async function hostileApp (t: Test, backend: BackendName): Promise<HostileApp> {
  const { app, rows } = await buildTestApp(t, backend)
  return { app, rows: async () => new Map((await rows()).map((r) => [r.id, r])) }
}

const protoSnapshot = (): string => JSON.stringify([Object.prototype, Array.prototype, Function.prototype, String.prototype]
  .map((p) => Object.getOwnPropertyNames(p).sort()))

async function injectTests (t: Test, h: HostileApp): Promise<void> {
  const { app } = h

  // The requests of test/support/fuzz-requests.ts, judged there: methods, paths, tokens, bodies, and media types from
  // `application/json; ; charset=utf-8` (empty parameters, accepted) to `application/jsonx` (415).
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

forEachBackend(t, 'hostile input', async (t, backend) => {
  const h = await hostileApp(t, backend)
  await injectTests(t, h)
})
