import t from 'tap'
import { buildStubApp, jsonHeaders, TOKEN } from '../helper.js'

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test('request ids', async (t) => {
  const lines: Array<Record<string, unknown>> = []
  const everything: string[] = []
  const { app } = await buildStubApp(t, {}, {
    level: 'debug',
    stream: {
      write: (line: string) => {
        everything.push(line)
        lines.push(JSON.parse(line) as Record<string, unknown>)
      }
    }
  })
  // Start-up lines belong to no request.
  lines.length = 0

  // One request of each kind that answers: created, rejected before and
  // after the body is read, unknown route, public probe.
  const requests = (id: string | string[] | undefined) => {
    const headers = (extra: Record<string, string>) => ({ ...extra, ...(id === undefined ? {} : { 'x-request-id': id }) })
    return [
      app.inject({ method: 'POST', url: '/plants', headers: headers(jsonHeaders()), payload: `{"id": ${Math.floor(Math.random() * 1e9)}, "name": "rid"}` }),
      app.inject({ method: 'POST', url: '/plants', headers: headers({ 'content-type': 'application/json' }), payload: '{}' }),
      app.inject({ method: 'POST', url: '/plants', headers: headers({ ...jsonHeaders(), 'content-type': 'text/plain' }), payload: 'x' }),
      app.inject({ method: 'POST', url: '/plants', headers: headers(jsonHeaders()), payload: '{"id": 1.5, "name": "x"}' }),
      app.inject({ method: 'GET', url: '/nowhere', headers: headers({}) }),
      app.inject({ method: 'GET', url: '/health/ready', headers: headers({}) })
    ]
  }

  t.test('an acceptable incoming id is returned on every response and logged on every line', async (t) => {
    for (const id of ['abc-123', 'A.b_c:d-e', 'x', 'z'.repeat(128), '0f8fad5b-d9cb-469f-a165-70867728950e']) {
      lines.length = 0
      const responses = await Promise.all(requests(id))
      t.same(responses.map((r) => r.statusCode), [200, 401, 415, 400, 404, 200], `${id.slice(0, 20)}: each kind of answer`)
      for (const res of responses) t.equal(res.headers['x-request-id'], id, `${res.statusCode}: echoed`)
      t.equal(lines.filter((l) => l.msg === 'request').length, responses.length, 'an access line was logged for each request')
      t.same(lines.filter((l) => l.reqId !== id), [], 'every line logged carries that id')
    }
  })

  t.test('an id too long, of other characters, or sent twice is replaced by a generated one', async (t) => {
    for (const bad of ['z'.repeat(129), 'has space', 'semi;colon', 'quote"d', 'slash/ed', 'ümlaut', '', ['a', 'b']]) {
      lines.length = 0
      const responses = await Promise.all(requests(bad))
      const ids = responses.map((r) => r.headers['x-request-id'] as string)
      const label = JSON.stringify(bad).slice(0, 20)
      t.ok(ids.every((id) => uuid.test(id)), `${label}: generated UUIDs returned`)
      t.equal(new Set(ids).size, ids.length, `${label}: one per request`)
      t.same(lines.filter((l) => !ids.includes(l.reqId as string)), [], `${label}: every line carries the generated id`)
      t.ok(ids.every((id) => lines.some((l) => l.reqId === id)), `${label}: each request was logged under its id`)
    }
  })

  t.test('without an incoming id each request gets its own', async (t) => {
    const responses = await Promise.all(requests(undefined))
    const ids = responses.map((r) => r.headers['x-request-id'] as string)
    t.ok(ids.every((id) => uuid.test(id)))
    t.equal(new Set(ids).size, ids.length)
  })

  t.test('the token never reaches a log line', async (t) => {
    t.ok(everything.length > 100)
    t.notOk(everything.some((l) => l.includes(TOKEN)))
  })
})
