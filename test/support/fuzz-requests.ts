import fc from 'fast-check'
import { OTHER_TOKEN, TOKEN } from '../helper.js'

// Generated requests for POST /plants (and a few other routes): bodies,
// content types and Authorization headers from plausible to garbage.
export interface FuzzRequest {
  method: string
  url: string
  authorization?: string
  contentType?: string
  payload?: string | Buffer
  // Set when the body is a plant object we built: the id as decimal text.
  id?: string
}

const printable = (maxLength: number): fc.Arbitrary<string> =>
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength })

export const authorizationArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constantFrom(`Bearer ${TOKEN}`, `bearer ${TOKEN}`, `BEARER ${OTHER_TOKEN}`, `Bearer  ${TOKEN} `), weight: 6 },
  fc.constant(undefined),
  fc.constantFrom(
    `Bearer ${TOKEN.slice(0, -1)}`, `Bearer ${TOKEN}x`, `Bearer x${TOKEN}`, `Basic ${TOKEN}`, TOKEN,
    'Bearer', 'Bearer ', `Bearer ${TOKEN},${OTHER_TOKEN}`, `Bearer ${TOKEN}\u00a0`, `Token ${TOKEN}`, `Bearer\t${TOKEN}`, `Bearer \t${TOKEN}`
  ),
  printable(80),
  printable(80).map((s) => `Bearer ${s}`)
)

export const contentTypeArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'Application/JSON;charset=UTF-8', 'application/json;', 'application/json; ; charset=utf-8'), weight: 6 },
  fc.constant(undefined),
  fc.constantFrom(
    'application/json; charset=latin1', 'application/json; charset=', 'application/jsonx',
    'text/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x',
    'application/*', '*/*', ';', '', 'application/json, text/plain', 'application/merge-patch+json'
  ),
  printable(60)
)

const hostileKey = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', 'id', 'name', 'tag', ''),
  fc.string({ unit: 'binary', maxLength: 12 })
)

// JSON text of an id, whole or not, in range or not, or not a number at all.
const idTextArb: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: 0, max: 40 }).map(String),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
  fc.double().map((d) => JSON.stringify(d) ?? 'null'),
  fc.constantFrom('7.0', '7e2', '-0', '1e400', '-1e400', '1e-400', '9223372036854775808', '-9223372036854775809',
    '9007199254740993.5', '"7"', 'null', 'true', '[]', '{}', '0x10', '07', '+7', '.5', '1.', 'NaN', 'Infinity')
)

const stringTextArb: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.string({ maxLength: 30 }).map((s) => JSON.stringify(s)), weight: 4 },
  fc.string({ unit: 'binary', maxLength: 30 }).map((s) => JSON.stringify(s)),
  fc.constantFrom('"\\u0000"', '"\\ud800"', '"a\\udc00b"', '""', 'null', '1', 'true', '[]', '{}', '"\\x"', '"unterminated')
)

// A plant-shaped object as JSON text: fields present or not, of any type,
// plus unknown and prototype-named keys, in random order.
const plantArb: fc.Arbitrary<{ text: string, id: string }> = fc.record({
  id: fc.option(idTextArb, { nil: undefined, freq: 10 }),
  name: fc.option(stringTextArb, { nil: undefined, freq: 10 }),
  tag: fc.option(stringTextArb, { nil: undefined, freq: 2 }),
  extra: fc.array(fc.tuple(hostileKey, fc.jsonValue({ maxDepth: 3 })), { maxLength: 4 })
}).chain((r) => {
  const members: string[] = []
  if (r.id !== undefined) members.push(`"id": ${r.id}`)
  if (r.name !== undefined) members.push(`"name": ${r.name}`)
  if (r.tag !== undefined) members.push(`"tag": ${r.tag}`)
  for (const [key, value] of r.extra) members.push(`${JSON.stringify(key)}: ${JSON.stringify(value)}`)
  return fc.shuffledSubarray(members, { minLength: members.length, maxLength: members.length })
    .map((ordered) => ({ text: `{${ordered.join(', ')}}`, id: r.id ?? '' }))
})

// One edit of a text: a character dropped, doubled or replaced.
const mutated = (text: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.tuple(text, fc.nat(), fc.constantFrom('drop', 'double', 'replace'), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }))
    .map(([s, n, how, c]) => {
      const i = s.length === 0 ? 0 : n % s.length
      if (how === 'drop') return s.slice(0, i) + s.slice(i + 1)
      if (how === 'double') return s.slice(0, i + 1) + s.slice(i)
      return s.slice(0, i) + c + s.slice(i + 1)
    })

const bodyArb: fc.Arbitrary<{ payload?: string | Buffer, id?: string }> = fc.oneof(
  { arbitrary: plantArb.map(({ text, id }) => ({ payload: text, id })), weight: 8 },
  { arbitrary: mutated(plantArb.map((p) => p.text)).map((payload) => ({ payload })), weight: 2 },
  fc.json({ maxDepth: 4 }).map((payload) => ({ payload })),
  fc.string({ unit: 'binary', maxLength: 60 }).map((payload) => ({ payload })),
  fc.uint8Array({ maxLength: 60 }).map((bytes) => ({ payload: Buffer.from(bytes) })),
  // Invalid UTF-8 inside an otherwise good plant.
  fc.uint8Array({ minLength: 1, maxLength: 4 }).map((bytes) => ({
    payload: Buffer.concat([Buffer.from('{"id": 1, "name": "'), Buffer.from(bytes.map((b) => b | 0x80)), Buffer.from('"}')])
  })),
  fc.constant({}),
  fc.constantFrom('{}', '[]', 'null', '"plant"', '1', '{"id": 1, "name": "x", "id": 1}', '{"id": 1, "name": "x"} {}')
    .map((payload) => ({ payload }))
)

const routeArb = fc.oneof(
  { arbitrary: fc.constant({ method: 'POST', url: '/plants' }), weight: 20 },
  fc.constantFrom(
    { method: 'GET', url: '/plants' }, { method: 'PUT', url: '/plants' }, { method: 'DELETE', url: '/plants' },
    { method: 'POST', url: '/plants/' }, { method: 'POST', url: '/plants?id=1' }, { method: 'POST', url: '/PLANTS' },
    { method: 'POST', url: '/nowhere' }, { method: 'GET', url: '/health/live' }, { method: 'POST', url: '/health/ready' }
  )
)

export const fuzzRequestArb: fc.Arbitrary<FuzzRequest> = fc.record({
  route: routeArb,
  authorization: authorizationArb,
  contentType: contentTypeArb,
  body: bodyArb
}).map(({ route, authorization, contentType, body }) => ({
  ...route,
  ...(authorization === undefined ? {} : { authorization }),
  ...(contentType === undefined ? {} : { contentType }),
  ...body
}))

export function carriesValidToken (authorization: string | undefined): boolean {
  // The contract: the scheme (any case), a run of SP (RFC 9110 11.4: a tab
  // is not a separator), then exactly the token; SP and HTAB at the end of
  // the header value are not part of it.
  const token = /^bearer +(.*?)[ \t]*$/is.exec(authorization ?? '')?.[1]
  return token !== undefined && [TOKEN, OTHER_TOKEN].includes(token)
}

// The exact integer a JSON number denotes, as decimal text, when it is whole.
export function wholeValue (text: string): string | undefined {
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

// Checks one answer against the contract; returns what is wrong, if anything.
export function judge (req: FuzzRequest, res: { statusCode: number, headers: Record<string, unknown>, body: string }): string | undefined {
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
