import t from 'tap'
import { buildStubApp, assertErrorShape, jsonHeaders, auth, postPlant } from '../helper.js'

// Every refusal here happens before the store is asked (test/support/stub-store.ts).
t.test('media type and body', async (t) => {
  const { app, store } = await buildStubApp(t, { bodyLimit: 1024 })
  const valid = '{"id": 1, "name": "Monstera"}'

  t.test('Content-Type must be application/json: 415 otherwise, body or not', async (t) => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', 'application/json-patch+json', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', ';;']) {
      assertErrorShape(t, await postPlant(app, valid, { ...auth(), 'content-type': type }), 415)
    }
    assertErrorShape(t, await postPlant(app, valid, auth()), 415)
    assertErrorShape(t, await app.inject({ method: 'POST', url: '/plants', headers: auth() }), 415)
    assertErrorShape(t, await app.inject({ method: 'POST', url: '/plants', headers: { ...auth(), 'content-type': 'text/plain' } }), 415)
  })

  t.test('parameters such as charset=utf-8 are allowed', async (t) => {
    for (const type of ['application/json; charset=utf-8', 'application/json;charset=UTF-8', 'Application/JSON']) {
      const res = await postPlant(app, `{"id": ${type.length}, "name": "ok"}`, { ...auth(), 'content-type': type })
      t.equal(res.statusCode, 200, type)
    }
  })

  t.test('malformed, empty or non-object bodies: 400', async (t) => {
    for (const payload of ['', ' ', '{', '{"id": 1, "name": "a"', '{"id": 1, "name": "a"}}', "{'id': 1}", '[]', '[{"id": 1, "name": "a"}]', '"plant"', '7', 'null', 'true', '{"id": 1, "name": "a",}', '{"id": 01, "name": "a"}', '{"id": NaN, "name": "a"}']) {
      assertErrorShape(t, await postPlant(app, payload), 400)
    }
  })

  t.test('bytes that are not valid UTF-8: 400, never a replacement character', async (t) => {
    for (const bytes of [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]]) {
      const payload = Buffer.concat([Buffer.from('{"id": 50, "name": "a'), Buffer.from(bytes), Buffer.from('"}')])
      assertErrorShape(t, await app.inject({ method: 'POST', url: '/plants', headers: jsonHeaders(), payload }), 400)
    }
    t.notOk(store.creates.some((p) => p.id === 50n), 'the store was never asked')
  })

  t.test('the same key twice: 400, equal values or not', async (t) => {
    for (const payload of ['{"id": 60, "name": "a", "name": "a"}', '{"id": 60, "id": 61, "name": "a"}', '{"id": 60, "name": "a", "x": 1, "x": 1}', '{"id": 60, "name": "a", "\\u006eame": "a"}']) {
      const body = assertErrorShape(t, await postPlant(app, payload), 400)
      t.match(body.message, /Duplicate key/)
    }
    t.notOk(store.creates.some((p) => p.id === 60n || p.id === 61n), 'the store was never asked')
  })

  t.test('a body over BODY_LIMIT: 413', async (t) => {
    const big = JSON.stringify({ id: 70, name: 'x'.repeat(2000) })
    assertErrorShape(t, await postPlant(app, big), 413)
    const fits = JSON.stringify({ id: 71, name: 'x'.repeat(900) })
    t.equal((await postPlant(app, fits)).statusCode, 200, 'a body under the limit passes')
  })

  t.test('__proto__ and constructor keys are ordinary unknown properties', async (t) => {
    const res = await postPlant(app, '{"id": 80, "name": "p", "__proto__": {"polluted": 1, "tag": "x"}, "constructor": {"prototype": {"polluted": 2}}}')
    t.equal(res.statusCode, 200)
    t.equal(res.body, '{"name":"p"}', 'the __proto__ tag did not become the plant tag')
    t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype untouched')
    t.same(store.creates.find((p) => p.id === 80n), { id: 80n, name: 'p' }, 'the store got no tag')
  })
})
