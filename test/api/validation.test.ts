import t from 'tap'
import { buildStubApp, assertErrorShape, postPlant } from '../helper.js'

// Every refusal here happens before the store is asked (test/support/stub-store.ts).
t.test('NewPlant validation', async (t) => {
  const { app, store } = await buildStubApp(t)

  t.test('id must be a whole JSON number within int64, without coercion', async (t) => {
    for (const id of ['"7"', '1.5', 'null', 'true', 'false', '[7]', '{"v":7}', '1e-400', '9007199254740993.5']) {
      const res = await postPlant(app, `{"id": ${id}, "name": "bad"}`)
      const body = assertErrorShape(t, res, 400)
      t.equal(body.message, 'body/id must be integer', `${id}: the message names the field and the rule`)
    }
    // Whole numbers, but past int64: the rule they break is the format.
    for (const id of ['1e400', '-1e400', '9223372036854775808', '-9223372036854775809', '18446744073709551616', '1e19']) {
      const body = assertErrorShape(t, await postPlant(app, `{"id": ${id}, "name": "bad"}`), 400)
      t.equal(body.message, 'body/id must match format "int64"', `${id}: outside int64`)
    }
    t.same(store.creates, [], 'the store was never asked')
  })

  t.test('id is required', async (t) => {
    const body = assertErrorShape(t, await postPlant(app, '{"name": "no id"}'), 400)
    t.equal(body.message, "body must have required property 'id'")
  })

  t.test('name is a required JSON string', async (t) => {
    for (const name of ['7', 'null', 'true', '["a"]', '{}']) {
      const body = assertErrorShape(t, await postPlant(app, `{"id": 1, "name": ${name}}`), 400)
      t.equal(body.message, 'body/name must be string', name)
    }
    const missing = assertErrorShape(t, await postPlant(app, '{"id": 1}'), 400)
    t.equal(missing.message, "body must have required property 'name'")
  })

  t.test('tag, when present, is a JSON string; null is not', async (t) => {
    for (const tag of ['null', '7', 'false', '[]']) {
      const body = assertErrorShape(t, await postPlant(app, `{"id": 1, "name": "a", "tag": ${tag}}`), 400)
      t.equal(body.message, 'body/tag must be string', tag)
    }
  })

  t.test('strings the database cannot store exactly are refused, naming the field', async (t) => {
    const cases: Array<[string, string]> = [
      ['{"id": 2, "name": "a\\u0000b"}', 'name'],
      ['{"id": 2, "name": "\\ud800"}', 'name'],
      ['{"id": 2, "name": "x\\udc00y"}', 'name'],
      ['{"id": 2, "name": "ok", "tag": "\\u0000"}', 'tag'],
      ['{"id": 2, "name": "ok", "tag": "\\udbff"}', 'tag']
    ]
    for (const [payload, field] of cases) {
      const body = assertErrorShape(t, await postPlant(app, payload), 400)
      t.match(body.message, new RegExp(`^body/${field} `), payload)
    }
    t.same(store.creates, [], 'the store was never asked')
  })

  t.test('paired surrogates and other unicode reach the store exactly', async (t) => {
    const name = 'Sansevieria 🌱 «ünïcödé» \u2028 \\ "quoted"'
    const res = await postPlant(app, JSON.stringify({ id: 3, name, tag: '\ud83c\udf35' }))
    t.equal(res.statusCode, 200)
    t.same(JSON.parse(res.body), { name, tag: '🌵' })
    // Stored exactly on both databases: test/api/plants.test.ts.
    t.same(store.creates.at(-1), { id: 3n, name, tag: '🌵' })
  })
})
