import t, { type Test } from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createPlantStoreClient, type PlantStoreClientOptions } from '../../client/src/index.js'
import { forEachBackend, buildTestApp, TOKEN } from '../helper.js'

// The client package against the real service over real HTTP: the app the
// server builds, listening on a free loopback port, on each backend. What
// the database holds is read back with SQL, ids as exact decimal text.

const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)
const PAST_2_53 = 2n ** 53n + 1n // 9007199254740993: a number would send …992

// Records every request the client makes, then sends it on.
function recordingFetch () {
  const sent: Array<{ method: string, url: string, headers: Headers, body: string }> = []
  const fetchFn = async (request: Request): Promise<Response> => {
    sent.push({ method: request.method, url: request.url, headers: request.headers, body: await request.clone().text() })
    return await fetch(request)
  }
  return { sent, fetch: fetchFn }
}

// A loopback front for the service that refuses the first `refusals`
// requests with `status` and a Retry-After, then passes requests through:
// what a caller meets while the service restarts or sheds load.
async function refusingFront (t: Pick<Test, 'teardown'>, target: string, status: number, retryAfter: string, refusals: number) {
  const arrivals: number[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      arrivals.push(Date.now())
      if (arrivals.length <= refusals) {
        res.writeHead(status, { 'content-type': 'application/json', 'retry-after': retryAfter, 'x-request-id': `front-${arrivals.length}` })
        res.end(JSON.stringify({ error: status, message: 'Refused by the front; retry later' }))
        return
      }
      const upstream = http.request(`${target}${req.url ?? '/'}`, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      })
      upstream.on('error', () => res.destroy())
      upstream.end(Buffer.concat(chunks))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrivals }
}

forEachBackend(t, 'the client against the service', async (t, backend) => {
  const { app, rows } = await buildTestApp(t, backend)
  const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 })
  const client = (options: Partial<PlantStoreClientOptions> = {}) => createPlantStoreClient({ baseUrl, token: TOKEN, ...options })

  t.test('create: 200 with the Plant as stored, and the request id', async (t) => {
    const result = await client().createPlant({ id: 1, name: 'Monstera', tag: 'indoor' })
    t.match(result, { ok: true, status: 200, plant: { name: 'Monstera', tag: 'indoor' }, requestId: /\S/ })
    t.same((await rows()).find((r) => r.id === '1'), { id: '1', name: 'Monstera', tag: 'indoor' })
  })

  t.test('the same create again: 200 (a replay), one row', async (t) => {
    const result = await client().createPlant({ id: 1n, name: 'Monstera', tag: 'indoor' })
    t.match(result, { ok: true, status: 200, plant: { name: 'Monstera', tag: 'indoor' } })
    t.equal((await rows()).filter((r) => r.id === '1').length, 1)
  })

  t.test('another plant under a stored id: 409 as a value, nothing overwritten', async (t) => {
    const result = await client().createPlant({ id: 1, name: 'Ficus' })
    t.match(result, { ok: false, status: 409, error: { error: 409, message: /already stored/ }, requestId: /\S/ })
    t.notOk('retryAfter' in result, 'no Retry-After on a 409')
    t.same((await rows()).find((r) => r.id === '1'), { id: '1', name: 'Monstera', tag: 'indoor' })
  })

  t.test('int64 ids are stored exactly: 2^63-1, -2^63 and 2^53+1', async (t) => {
    const { sent, fetch } = recordingFetch()
    for (const id of [INT64_MAX, INT64_MIN, PAST_2_53]) {
      const result = await client({ fetch }).createPlant({ id, name: `plant ${id}` })
      t.match(result, { ok: true, status: 200, plant: { name: `plant ${id}` } }, `${id}: 200`)
    }
    t.same(sent.map((s) => s.body), [
      '{"id":9223372036854775807,"name":"plant 9223372036854775807"}',
      '{"id":-9223372036854775808,"name":"plant -9223372036854775808"}',
      '{"id":9007199254740993,"name":"plant 9007199254740993"}'
    ], 'each id went out as a bare JSON number with all its digits')
    const stored = await rows()
    for (const id of [INT64_MAX, INT64_MIN, PAST_2_53]) {
      t.same(stored.find((r) => r.id === String(id)), { id: String(id), name: `plant ${id}`, tag: null }, `${id} is in the database exactly`)
    }
    t.notOk(stored.some((r) => r.id === '9007199254740992'), 'no rounded neighbour was stored')
    // The bigint and its exact decimal are the same plant: a replay.
    t.match(await client().createPlant({ id: PAST_2_53, name: `plant ${PAST_2_53}` }), { ok: true, status: 200 })
  })

  t.test('a wrong token: 401 as a value', async (t) => {
    const result = await client({ token: 'not-a-configured-token' }).createPlant({ id: 2, name: 'Ficus' })
    t.match(result, { ok: false, status: 401, error: { error: 401, message: /\S/ }, requestId: /\S/ })
    t.notOk((await rows()).some((r) => r.id === '2'), 'nothing stored')
  })

  t.test('it always sends JSON with its media type, so never a 415', async (t) => {
    const { sent, fetch } = recordingFetch()
    const plants = [
      { id: 10, name: 'Ficus' },
      { id: 11n, name: '', tag: 'quotes " and \\ and \u00e9 and \ud83c\udf31' },
      { id: -0, name: 'zero' }
    ]
    for (const plant of plants) {
      const result = await client({ fetch }).createPlant(plant)
      t.equal(result.status, 200, `${String(plant.id)}: 200`)
    }
    for (const request of sent) {
      t.equal(request.method, 'POST')
      t.equal(request.url, `${baseUrl}/plants`)
      t.equal(request.headers.get('content-type'), 'application/json')
      t.equal(request.headers.get('authorization'), `Bearer ${TOKEN}`)
      t.doesNotThrow(() => JSON.parse(request.body), 'the body is JSON')
    }
    const stored = await rows()
    t.same(stored.find((r) => r.id === '11'), { id: '11', name: '', tag: 'quotes " and \\ and \u00e9 and \ud83c\udf31' }, 'strings arrive exactly')
    t.same(stored.find((r) => r.id === '0'), { id: '0', name: 'zero', tag: null }, '-0 is 0')
  })

  t.test('a number id that is not a safe integer is refused before anything is sent', async (t) => {
    const { sent, fetch } = recordingFetch()
    const before = await rows()
    // 2 ** 53 + 1 evaluates to 2 ** 53 already, as does the literal: the
    // caller's id is gone before the client sees it, which is the point.
    // eslint-disable-next-line @typescript-eslint/no-loss-of-precision
    const rounded = 9007199254740993
    for (const id of [2 ** 53 + 1, rounded, -(2 ** 53), 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      await t.rejects(client({ fetch }).createPlant({ id, name: 'rounded' }), new TypeError(`plant id ${id} is not a safe integer: a number is exact only up to 2^53-1 (9007199254740991); pass larger ids as a bigint, e.g. 9007199254740993n`))
    }
    t.equal(sent.length, 0, 'no request was made')
    t.same(await rows(), before, 'nothing stored')
    t.match(await client({ fetch }).createPlant({ id: Number.MAX_SAFE_INTEGER, name: 'largest safe' }), { ok: true, status: 200 }, '2^53-1 as a number is fine')
  })

  t.test('a retried 503 is waited for as Retry-After says, then the create succeeds', async (t) => {
    const front = await refusingFront(t, baseUrl, 503, '1', 1)
    const start = Date.now()
    const result = await createPlantStoreClient({ baseUrl: front.url, token: TOKEN, retries: 2 }).createPlant({ id: 20n, name: 'retried' })
    t.match(result, { ok: true, status: 200, plant: { name: 'retried' } })
    t.equal(front.arrivals.length, 2, 'one refusal, one success')
    const waited = (front.arrivals[1] as number) - (front.arrivals[0] as number)
    t.ok(waited >= 900, `waited ${waited} ms after Retry-After: 1`)
    t.ok(Date.now() - start >= 900)
    t.same((await rows()).find((r) => r.id === '20'), { id: '20', name: 'retried', tag: null })
  })

  t.test('429 is retried too; retries stop at the limit and the last answer is returned', async (t) => {
    const front = await refusingFront(t, baseUrl, 429, '0', 1)
    t.match(await createPlantStoreClient({ baseUrl: front.url, token: TOKEN, retries: 1 }).createPlant({ id: 21, name: 'after 429' }), { ok: true, status: 200 })
    t.equal(front.arrivals.length, 2)

    const busy = await refusingFront(t, baseUrl, 503, '0', Infinity)
    const result = await createPlantStoreClient({ baseUrl: busy.url, token: TOKEN, retries: 2 }).createPlant({ id: 22, name: 'never' })
    t.match(result, { ok: false, status: 503, retryAfter: 0, error: { error: 503 }, requestId: 'front-3' })
    t.equal(busy.arrivals.length, 3, 'the first attempt and 2 retries')
  })

  t.test('a 504 is surfaced as outcome unknown, and a replay tells', async (t) => {
    const front = await refusingFront(t, baseUrl, 504, '0', 1)
    const unknown = await createPlantStoreClient({ baseUrl: front.url, token: TOKEN }).createPlant({ id: 25, name: 'unknown' })
    t.match(unknown, { ok: false, status: 504, outcome: 'unknown', retryAfter: 0, error: { error: 504 } })
    t.match(await createPlantStoreClient({ baseUrl: front.url, token: TOKEN }).createPlant({ id: 25, name: 'unknown' }), { ok: true, status: 200 }, 'the replay answers')

    const again = await refusingFront(t, baseUrl, 504, '0', 1)
    t.match(await createPlantStoreClient({ baseUrl: again.url, token: TOKEN, retries: 1 }).createPlant({ id: 26, name: 'replayed' }), { ok: true, status: 200 }, 'retries replay a 504')
    t.equal(again.arrivals.length, 2)
  })

  t.test('no retries unless asked, and none past maxRetryWaitMs', async (t) => {
    const once = await refusingFront(t, baseUrl, 503, '0', 1)
    t.match(await createPlantStoreClient({ baseUrl: once.url, token: TOKEN }).createPlant({ id: 23, name: 'x' }), { ok: false, status: 503, retryAfter: 0 })
    t.equal(once.arrivals.length, 1, 'retries default to 0')

    const long = await refusingFront(t, baseUrl, 503, '120', 1)
    const result = await createPlantStoreClient({ baseUrl: long.url, token: TOKEN, retries: 3 }).createPlant({ id: 24, name: 'x' })
    t.match(result, { ok: false, status: 503, retryAfter: 120 })
    t.equal(long.arrivals.length, 1, 'a 120 s wait is past the default 30 s bound: returned at once')
  })

  // Last: it closes this app's database.
  t.test('the database gone: 503 with Retry-After surfaced as retryAfter', async (t) => {
    await app.db.close()
    const result = await client().createPlant({ id: 30n, name: 'during the outage' })
    t.match(result, { ok: false, status: 503, retryAfter: 5, error: { error: 503, message: /retry later/ }, requestId: /\S/ })
    const bounded = await client({ retries: 5, maxRetryWaitMs: 1000 }).createPlant({ id: 30n, name: 'during the outage' })
    t.match(bounded, { ok: false, status: 503, retryAfter: 5 }, 'Retry-After: 5 is past maxRetryWaitMs: not waited for')
  })
})
