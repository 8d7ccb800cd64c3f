import t from 'tap'
import { newRequestId } from '../../plugins/http-edge/request-id.js'

const uuidV4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test('fresh request ids are random version 4 UUIDs, across many blocks', async (t) => {
  // Two blocks of the pool and a part of a third.
  const ids = Array.from({ length: 2_500 }, () => newRequestId())
  t.same(ids.filter((id) => !uuidV4.test(id)), [], 'every id is a version 4 UUID of the RFC variant')
  t.equal(new Set(ids).size, ids.length, 'no id repeats')
  // Every random hex digit takes many values: a formatting slip (a byte
  // written twice, a position never filled) would pin one down.
  for (let at = 0; at < 36; at++) {
    if ([8, 13, 14, 18, 23].includes(at)) continue
    const digits = new Set(ids.map((id) => id[at]))
    const expected = at === 19 ? 4 : 16
    t.equal(digits.size, expected, `position ${at} takes all ${expected} digits it can`)
  }
})
