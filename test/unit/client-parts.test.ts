import t from 'tap'
import { newPlantJson } from '../../client/src/exact-json.js'
import { retryAfterSeconds } from '../../client/src/retry-after.js'

// The client's two pieces of logic, on their own. The client against the
// real service is test/api/client.test.ts.

t.test('newPlantJson writes the id as a bare number with all its digits', async (t) => {
  t.equal(newPlantJson({ id: 9007199254740993n, name: 'Ficus' }), '{"id":9007199254740993,"name":"Ficus"}')
  t.equal(newPlantJson({ id: -(2n ** 63n), name: 'a', tag: 'b' }), '{"id":-9223372036854775808,"name":"a","tag":"b"}')
  t.equal(newPlantJson({ id: -0, name: '' }), '{"id":0,"name":""}')
  t.equal(newPlantJson({ id: 1, name: '"\\\n\u2028', tag: undefined }), '{"id":1,"name":"\\"\\\\\\n\u2028"}', 'strings escaped by JSON.stringify; an undefined tag is left out')
  t.same(JSON.parse(newPlantJson({ id: 7, name: 'x', tag: 'y' })), { id: 7, name: 'x', tag: 'y' })
  t.throws(() => newPlantJson({ id: 2 ** 53, name: 'x' }), TypeError)
})

t.test('retryAfterSeconds reads delay-seconds and HTTP dates', async (t) => {
  const now = Date.parse('2026-01-01T00:00:00Z')
  t.equal(retryAfterSeconds('5', now), 5)
  t.equal(retryAfterSeconds(' 0 ', now), 0)
  t.equal(retryAfterSeconds('Thu, 01 Jan 2026 00:00:30 GMT', now), 30)
  t.equal(retryAfterSeconds('Wed, 31 Dec 2025 23:00:00 GMT', now), 0, 'a date in the past: no wait')
  t.equal(retryAfterSeconds(null, now), undefined)
  t.equal(retryAfterSeconds('-1', now), undefined)
  t.equal(retryAfterSeconds('soon', now), undefined)
})
