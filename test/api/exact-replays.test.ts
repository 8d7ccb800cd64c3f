import t from 'tap'
import fc from 'fast-check'
import http from 'node:http'
import { forEachBackend, jsonHeaders, listeningTestApp } from '../helper.js'
import { request } from '../support/http.js'
import { fuzzRuns } from '../support/fuzz.js'

// A replay is compared with what is stored exactly, code point for code
// point, on both databases: an exact retry answers 200 with the plant as
// sent, any difference (a leading U+FEFF included) 409. Over real HTTP, and
// checked against the bytes the database holds (read as hex, so no text
// decoder stands between the test and the row).

const STORED_BYTES_SQL = "SELECT id::text AS id, encode(convert_to(name, 'UTF8'), 'hex') AS name, " +
  "CASE WHEN tag IS NULL THEN NULL ELSE encode(convert_to(tag, 'UTF8'), 'hex') END AS tag FROM plants WHERE id = $1"

const hex = (text: string): string => Buffer.from(text, 'utf8').toString('hex')

interface Sent { id: number, name: string, tag?: string }

const BOM = '\ufeff'

// Code points the contract accepts, weighted toward the awkward ones:
// byte-order marks, noncharacters, combining marks, every plane. Never
// U+0000 or a surrogate (those are 400).
const codePointArb: fc.Arbitrary<number> = fc.oneof(
  fc.constantFrom(0xfeff, 0xfffe, 0xffff, 0xfdd0, 0xfdef, 0xfffd, 0x200b, 0x200d, 0x2028, 0x00a0, 0x0085),
  // The two noncharacters at the end of each of the 17 planes.
  fc.tuple(fc.integer({ min: 0, max: 16 }), fc.boolean()).map(([plane, last]) => plane * 0x10000 + (last ? 0xffff : 0xfffe)),
  fc.integer({ min: 0x0300, max: 0x036f }),
  fc.integer({ min: 0x20, max: 0x7e }),
  fc.integer({ min: 1, max: 0x10ffff }).filter((c) => c < 0xd800 || c > 0xdfff)
)

const textArb: fc.Arbitrary<string> = fc.tuple(fc.boolean(), fc.array(codePointArb, { maxLength: 12 }))
  .map(([bom, points]) => (bom ? BOM : '') + String.fromCodePoint(...points))

// One plant, and one way to make a different one from it.
const caseArb = fc.record({
  name: textArb,
  tag: fc.option(textArb, { nil: undefined }),
  change: fc.constantFrom('toggle leading BOM of name', 'toggle leading BOM of tag', 'append to name', 'drop tag or add one')
})

function changed (plant: Sent, change: string): Sent {
  const toggle = (s: string): string => s.startsWith(BOM) ? s.slice(1) : BOM + s
  switch (change) {
    case 'toggle leading BOM of name': return { ...plant, name: toggle(plant.name) }
    case 'toggle leading BOM of tag': return { ...plant, tag: toggle(plant.tag ?? '') }
    case 'append to name': return { ...plant, name: plant.name + '\u0301' }
    default: return plant.tag === undefined ? { ...plant, tag: '' } : { id: plant.id, name: plant.name }
  }
}

forEachBackend(t, 'exact replays over HTTP', async (t, backend) => {
  const { app, port } = await listeningTestApp(t, backend)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const post = async (plant: Sent): Promise<{ status: number, body: string }> =>
    await request(`http://127.0.0.1:${port}/plants`, { method: 'POST', headers: jsonHeaders(), body: JSON.stringify(plant), agent })
  const storedBytes = async (id: number): Promise<{ name: string, tag: string | null } | undefined> => {
    const [row] = await app.db.query<{ name: string, tag: string | null }>(STORED_BYTES_SQL, [String(id)])
    return row === undefined ? undefined : { name: row.name, tag: row.tag }
  }
  const answerOf = (plant: Sent): string => JSON.stringify(plant.tag === undefined ? { name: plant.name } : { name: plant.name, tag: plant.tag })

  await t.test('a leading U+FEFF: create 200, the same again 200, without the BOM 409', async (t) => {
    const plant = { id: 4242, name: `${BOM}abc`, tag: BOM }
    const created = await post(plant)
    t.same([created.status, created.body], [200, answerOf(plant)], 'created')
    const again = await post(plant)
    t.same([again.status, again.body], [200, answerOf(plant)], 'an exact retry is 200, BOMs included')
    t.equal((await post({ id: 4242, name: 'abc', tag: '' })).status, 409, 'the same text without its BOMs is a different plant')
    t.equal((await post({ id: 4242, name: `${BOM}abc` })).status, 409, 'and so is no tag')
    t.same(await storedBytes(4242), { name: 'efbbbf616263', tag: 'efbbbf' }, 'the row holds the BOMs')
  })

  await t.test('a stored plant without a BOM: the same with one is 409', async (t) => {
    t.equal((await post({ id: 4243, name: 'abc', tag: 'x' })).status, 200)
    t.equal((await post({ id: 4243, name: `${BOM}abc`, tag: 'x' })).status, 409)
    t.equal((await post({ id: 4243, name: 'abc', tag: `${BOM}x` })).status, 409)
    t.equal((await post({ id: 4243, name: 'abc', tag: 'x' })).status, 200)
  })

  await t.test('random Unicode round-trips through create, replay and conflict exactly', async (t) => {
    let id = 50_000
    let runs = 0
    await fc.assert(fc.asyncProperty(caseArb, async ({ name, tag, change }) => {
      runs++
      const plant: Sent = tag === undefined ? { id: ++id, name } : { id: ++id, name, tag }
      const created = await post(plant)
      if (created.status !== 200 || created.body !== answerOf(plant)) throw new Error(`create: ${created.status} ${created.body}`)
      const replay = await post(plant)
      if (replay.status !== 200 || replay.body !== answerOf(plant)) throw new Error(`replay: ${replay.status} ${replay.body}`)
      const other = changed(plant, change)
      const conflict = await post(other)
      if (conflict.status !== 409) throw new Error(`${change}: ${conflict.status} ${conflict.body}`)
      const stored = await storedBytes(plant.id)
      const sentBytes = { name: hex(plant.name), tag: plant.tag === undefined ? null : hex(plant.tag) }
      if (JSON.stringify(stored) !== JSON.stringify(sentBytes)) throw new Error(`stored ${JSON.stringify(stored)}, sent ${JSON.stringify(sentBytes)}`)
    }), { numRuns: fuzzRuns(150) })
    t.ok(runs >= fuzzRuns(150), `${runs} plants created, replayed and contradicted`)
  })
})
