import t from 'tap'
import http from 'node:http'
import { createTestDatabase, TOKEN } from '../helper.js'
import { appliedVersions, migrationVersions, needsPostgres, storedRows, timeUntil } from '../support/postgres.js'
import { startServerProcess, type SourceServer } from '../support/processes.js'
import { request, type HttpAnswer } from '../support/http.js'

// Three service processes on one PostgreSQL database, as replicas behind a
// load balancer would run.
const INSTANCES = 3
const IDS = 600
// Ids raced at once (each sent to every instance): bounded for a 2-core box.
const PARALLEL_IDS = 25

interface Sent { id: string, instance: number, name: string, tag?: string, answer: HttpAnswer }

// For each id, what each instance is sent: the same plant everywhere, a
// different plant everywhere, or two alike and one different.
function variants (i: number): Array<{ name: string, tag?: string }> {
  switch (i % 3) {
    case 0: return [{ name: 'same', tag: 't' }, { name: 'same', tag: 't' }, { name: 'same', tag: 't' }]
    case 1: return [{ name: 'a' }, { name: 'b' }, { name: 'c', tag: 'x' }]
    default: return [{ name: 'pair' }, { name: 'pair' }, { name: 'pair', tag: 'odd' }]
  }
}

// Small ids and ids past 2^53, which must stay exact through every process.
const idOf = (i: number): string => i % 2 === 0 ? String(i + 1) : (9007199254740993n + BigInt(i)).toString()

t.test(`${INSTANCES} service processes on one database`, { skip: needsPostgres }, async (t) => {
  const testDb = await createTestDatabase('postgres')
  const url = testDb.url as string
  t.teardown(() => testDb.drop())

  // Started together on an empty database: they race to migrate.
  const servers: SourceServer[] = await Promise.all(
    Array.from({ length: INSTANCES }, () => startServerProcess({ databaseUrl: url }))
  )
  t.teardown(() => Promise.all(servers.map((s) => s.stop())))
  await Promise.all(servers.map((s) => timeUntil(async () => (await request(`${s.url}/health/ready`)).status === 200, 20_000, 100)))
  t.pass('all instances ready')

  t.same(await appliedVersions(url), migrationVersions(), 'each migration recorded exactly once')
  // Log lines are written in the background: wait until each has said how its migration went.
  const migrationLine = (s: SourceServer): boolean => s.logs.some((l) => l.msg === 'migrations applied' || l.msg === 'schema up to date')
  await timeUntil(async () => servers.every(migrationLine), 5_000, 50)
  const appliedBy = servers.filter((s) => s.logs.some((l) => l.msg === 'migrations applied')).length
  t.equal(appliedBy, 1, 'exactly one instance applied the migrations; the others found the schema up to date')

  const agents = servers.map(() => new http.Agent({ keepAlive: true, maxSockets: PARALLEL_IDS }))
  t.teardown(() => agents.forEach((a) => a.destroy()))
  const sent: Sent[] = []
  const raceOne = async (i: number): Promise<void> => {
    const id = idOf(i)
    await Promise.all(variants(i).map(async (plant, instance) => {
      const body = `{"id": ${id}, "name": ${JSON.stringify(plant.name)}${plant.tag === undefined ? '' : `, "tag": ${JSON.stringify(plant.tag)}`}}`
      const answer = await request(`${servers[instance]?.url}/plants`, {
        method: 'POST',
        agent: agents[instance],
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body
      })
      sent.push({ id, instance, ...plant, answer })
    }))
  }
  const start = performance.now()
  let next = 0
  await Promise.all(Array.from({ length: PARALLEL_IDS }, async () => {
    while (next < IDS) await raceOne(next++)
  }))
  const elapsedMs = performance.now() - start

  const rows = await storedRows(url)
  t.equal(rows.size, IDS, 'exactly one row per id')
  const wrong: string[] = []
  const counts = { 200: 0, 409: 0, other: 0 }
  for (const s of sent) {
    const row = rows.get(s.id)
    if (row === undefined) {
      wrong.push(`${s.id}: no row`)
      continue
    }
    const stored = row.tag === null ? { name: row.name } : { name: row.name, tag: row.tag }
    const sameAsStored = s.name === row.name && (s.tag ?? null) === row.tag
    if (s.answer.status === 200) {
      counts[200]++
      if (s.answer.body !== JSON.stringify(stored)) wrong.push(`${s.id}@${s.instance}: 200 with ${s.answer.body}, stored ${JSON.stringify(stored)}`)
      if (!sameAsStored) wrong.push(`${s.id}@${s.instance}: 200 for data that differs from the stored row`)
    } else if (s.answer.status === 409) {
      counts[409]++
      if (sameAsStored) wrong.push(`${s.id}@${s.instance}: 409 for the stored data itself`)
      const body = JSON.parse(s.answer.body) as Record<string, unknown>
      if (body.error !== 409 || typeof body.message !== 'string') wrong.push(`${s.id}@${s.instance}: 409 body ${s.answer.body}`)
    } else {
      counts.other++
      wrong.push(`${s.id}@${s.instance}: status ${s.answer.status} ${s.answer.body}`)
    }
  }
  t.equal(sent.length, IDS * INSTANCES, 'every request answered')
  t.same(wrong, [], 'every 200 matches the stored row; every loser of a conflict got 409')
  // Alike everywhere: nobody loses; all different: two lose.
  t.equal(counts[409], IDS / 3 * 2 + countPairLosses(rows), 'the 409 count follows from which data was stored')
  t.comment(`figures: instances=${INSTANCES} ids=${IDS} requests=${sent.length} 200s=${counts[200]} 409s=${counts[409]} other=${counts.other} elapsedMs=${Math.round(elapsedMs)}`)

  for (const s of servers) t.equal(await s.stop(), 0, 'instance stops cleanly')
})

// For "two alike, one different" ids: when the odd one won, both of the pair
// lose (2); when the pair won, only the odd one loses (1). Returns the sum
// over those ids.
function countPairLosses (rows: Map<string, { tag: string | null }>): number {
  let losses = 0
  for (let i = 0; i < IDS; i++) {
    if (i % 3 !== 2) continue
    losses += rows.get(idOf(i))?.tag === 'odd' ? 2 : 1
  }
  return losses
}
