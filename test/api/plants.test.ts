import t from 'tap'
import { forEachBackend, buildTestApp, postPlant, assertErrorShape } from '../helper.js'

forEachBackend(t, 'POST /plants stores and answers', async (t, backend) => {
  const { app, rows } = await buildTestApp(t, backend)

  t.test('a new plant answers 200 with exactly the Plant, stored durably', async (t) => {
    const res = await postPlant(app, '{"id": 1, "name": "Monstera", "tag": "indoor"}')
    t.equal(res.statusCode, 200)
    t.equal(res.body, '{"name":"Monstera","tag":"indoor"}', 'no id, nothing else')
    t.match(res.headers['content-type'], /^application\/json/)
    t.same((await rows()).find((r) => r.id === '1'), { id: '1', name: 'Monstera', tag: 'indoor' })
  })

  t.test('without a tag the Plant has no tag and the row holds NULL', async (t) => {
    const res = await postPlant(app, '{"id": 2, "name": "Fern"}')
    t.equal(res.body, '{"name":"Fern"}')
    t.same((await rows()).find((r) => r.id === '2'), { id: '2', name: 'Fern', tag: null })
  })

  t.test('unknown properties are accepted, not stored and not echoed', async (t) => {
    const res = await postPlant(app, '{"id": 3, "name": "Cactus", "colour": "green", "nested": {"a": [1, 2]}}')
    t.equal(res.statusCode, 200)
    t.equal(res.body, '{"name":"Cactus"}')
  })

  t.test('an empty name is a valid name', async (t) => {
    const res = await postPlant(app, '{"id": 4, "name": ""}')
    t.equal(res.statusCode, 200)
    t.equal(res.body, '{"name":""}')
  })

  t.test('an identical retry answers 200 with the same Plant and changes nothing', async (t) => {
    const first = await postPlant(app, '{"id": 10, "name": "Ivy", "tag": "climber"}')
    const again = await postPlant(app, '{"tag": "climber", "name": "Ivy", "id": 10, "extra": true}')
    t.equal(first.statusCode, 200)
    t.equal(again.statusCode, 200)
    t.equal(again.body, first.body)
    t.equal((await rows()).filter((r) => r.id === '10').length, 1)
  })

  t.test('absent tag equals absent tag on retry', async (t) => {
    await postPlant(app, '{"id": 11, "name": "Moss"}')
    const again = await postPlant(app, '{"id": 11, "name": "Moss"}')
    t.equal(again.statusCode, 200)
    t.equal(again.body, '{"name":"Moss"}')
  })

  t.test('the same id with a different name or tag answers 409 and overwrites nothing', async (t) => {
    await postPlant(app, '{"id": 20, "name": "Aloe", "tag": "succulent"}')
    for (const body of [
      '{"id": 20, "name": "Aloe vera", "tag": "succulent"}',
      '{"id": 20, "name": "Aloe"}',
      '{"id": 20, "name": "Aloe", "tag": "other"}',
      '{"id": 20, "name": "Aloe", "tag": ""}'
    ]) {
      assertErrorShape(t, await postPlant(app, body), 409)
    }
    t.same((await rows()).find((r) => r.id === '20'), { id: '20', name: 'Aloe', tag: 'succulent' })
  })

  t.test('a stored plant without tag conflicts with the same plant with a tag', async (t) => {
    await postPlant(app, '{"id": 21, "name": "Basil"}')
    assertErrorShape(t, await postPlant(app, '{"id": 21, "name": "Basil", "tag": "herb"}'), 409)
    t.same((await rows()).find((r) => r.id === '21'), { id: '21', name: 'Basil', tag: null })
  })

  t.test('ids are whole JSON numbers kept exact across the int64 range', async (t) => {
    const cases: Array<[string, string]> = [
      ['9223372036854775807', '9223372036854775807'],
      ['-9223372036854775808', '-9223372036854775808'],
      ['9007199254740993', '9007199254740993'],
      ['-9007199254740993', '-9007199254740993'],
      ['9.007199254740995e15', '9007199254740995'],
      ['700.0', '700'],
      ['7e2', '700'],
      ['-0', '0']
    ]
    for (const [text, stored] of cases) {
      const res = await postPlant(app, `{"id": ${text}, "name": "n${stored}"}`)
      t.equal(res.statusCode, 200, `${text} accepted`)
      t.same((await rows()).find((r) => r.id === stored), { id: stored, name: `n${stored}`, tag: null }, `${text} stored as ${stored}`)
    }
  })

  t.test('paired surrogates and other unicode are stored exactly', async (t) => {
    const name = 'Sansevieria 🌱 «ünïcödé» \u2028 \\ "quoted"'
    const res = await postPlant(app, JSON.stringify({ id: 600, name, tag: '\ud83c\udf35' }))
    t.equal(res.statusCode, 200)
    t.same(JSON.parse(res.body), { name, tag: '🌵' })
    t.same((await rows()).find((r) => r.id === '600'), { id: '600', name, tag: '🌵' })
  })

  t.test('concurrent creates of one new id store exactly one row', async (t) => {
    const bodies = Array.from({ length: 30 }, (_, i) =>
      i % 3 === 0 ? '{"id": 500, "name": "Race", "tag": "b"}' : '{"id": 500, "name": "Race", "tag": "a"}')
    const answers = await Promise.all(bodies.map((b) => postPlant(app, b)))
    const stored = (await rows()).filter((r) => r.id === '500')
    t.equal(stored.length, 1, 'one row')
    const winner = JSON.stringify({ name: 'Race', tag: stored[0]?.tag })
    answers.forEach((res, i) => {
      const sameAsStored = bodies[i]?.includes(`"tag": "${stored[0]?.tag}"`)
      if (sameAsStored) t.same([res.statusCode, res.body], [200, winner], 'same data: 200 with the stored plant')
      else t.equal(res.statusCode, 409, 'different data: 409')
    })
  })
})
