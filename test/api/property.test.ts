import t from 'tap'
import fc from 'fast-check'
import { forEachBackend, buildTestApp, postPlant, jsonHeaders } from '../helper.js'
import { fuzzRuns } from '../support/fuzz.js'

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

// What PostgreSQL text holds exactly: no U+0000, no lone surrogate.
const storable = fc.string({ unit: 'binary', maxLength: 40 }).filter((s) => !s.includes('\u0000') && s.isWellFormed())
// The same id written as JSON allows: plain, with a zero fraction, or with an exponent.
const idText = (id: bigint, form: number): string =>
  form === 0 ? id.toString() : form === 1 ? `${id}.000` : id === 0n ? '0e7' : `${id}0e-1`

const newPlant = fc.record({
  id: fc.bigInt({ min: INT64_MIN, max: INT64_MAX }),
  form: fc.integer({ min: 0, max: 2 }),
  name: storable,
  tag: fc.option(storable, { nil: undefined })
})

forEachBackend(t, 'properties', async (t, backend) => {
  const { app, rows } = await buildTestApp(t, backend)

  t.test('any valid NewPlant round-trips exactly, id included', async (t) => {
    const model = new Map<string, { name: string, tag: string | null }>()
    await fc.assert(fc.asyncProperty(newPlant, async ({ id, form, name, tag }) => {
      const fields = [`"id": ${idText(id, form)}`, `"name": ${JSON.stringify(name)}`]
      if (tag !== undefined) fields.push(`"tag": ${JSON.stringify(tag)}`)
      const res = await postPlant(app, `{${fields.join(', ')}}`)
      const key = id.toString()
      const known = model.get(key)
      const mine = { name, tag: tag ?? null }
      if (known !== undefined && (known.name !== name || known.tag !== mine.tag)) {
        return res.statusCode === 409
      }
      model.set(key, mine)
      return res.statusCode === 200 &&
        res.body === JSON.stringify(tag === undefined ? { name } : { name, tag })
    }), { numRuns: fuzzRuns(300) })
    const stored = await rows()
    t.equal(stored.length, model.size, 'one row per distinct id')
    for (const row of stored) t.same({ name: row.name, tag: row.tag }, model.get(row.id), `row ${row.id} as sent`)
  })

  t.test('arbitrary bodies never cause a 5xx and errors keep the Error shape', async (t) => {
    const body = fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc.string({ unit: 'binary' }),
      fc.dictionary(fc.string(), fc.jsonValue()).map((o) => JSON.stringify({ ...o, id: 1 })),
      fc.record({ id: fc.jsonValue(), name: fc.jsonValue(), tag: fc.jsonValue() }, { requiredKeys: [] }).map((v) => JSON.stringify(v))
    )
    await fc.assert(fc.asyncProperty(body, async (payload) => {
      const res = await app.inject({ method: 'POST', url: '/plants', headers: jsonHeaders(), payload })
      if (res.statusCode >= 500) return false
      const parsed = JSON.parse(res.body) as Record<string, unknown>
      if (res.statusCode === 200) return typeof parsed.name === 'string' && !('id' in parsed)
      return Object.keys(parsed).sort().join() === 'error,message' &&
        parsed.error === res.statusCode && typeof parsed.message === 'string' && parsed.message !== ''
    }), { numRuns: fuzzRuns(500) })
    t.pass(`${fuzzRuns(500)} arbitrary bodies answered without a 5xx`)
  })
})
