import t, { type Test } from 'tap'
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { request } from '../support/http.js'
import { startServerProcess, type SourceServer } from '../support/processes.js'
import { tempDataDir } from '../support/temp-dir.js'

// Thousands of static tokens, in a real server process: finding a token
// costs the same however many are configured, and the rate limit keeps a
// window for every configured caller.

const MANY = 6000

const NAMED = true
function tokenFile (dir: string, count: number): { path: string, tokens: string[] } {
  const tokens = Array.from({ length: count }, () => randomBytes(24).toString('base64url'))
  const path = join(dir, `tokens-${count}`)
  writeFileSync(path, tokens.map((token, i) => NAMED ? `caller-${i} ${token}` : token).join('\n') + '\n')
  return { path, tokens }
}

async function serve (t: Test, env: Record<string, string>): Promise<SourceServer> {
  const server = await startServerProcess({ env, startTimeoutMs: 60_000 })
  t.teardown(() => server.stop())
  return server
}

// Median milliseconds of `count` wrong-token creates, `concurrency` at a time
// on kept-alive connections.
async function median401 (url: string, count: number, concurrency: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  const times: number[] = []
  let sent = 0
  const worker = async (): Promise<void> => {
    while (sent < count) {
      sent++
      const started = performance.now()
      const res = await request(`${url}/plants`, {
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${randomBytes(24).toString('base64url')}`, 'content-type': 'application/json' },
        body: '{"id":1,"name":"Fern"}'
      })
      times.push(performance.now() - started)
      if (res.status !== 401) throw new Error(`a wrong token answered ${res.status}`)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  agent.destroy()
  times.sort((a, b) => a - b)
  return times[Math.floor(times.length / 2)] as number
}

t.test('6,000 tokens: the first and the last are found, wrong ones get 401; the 401\'s cost beside 2 tokens is printed', async (t) => {
  const dir = dirname(tempDataDir(t, 'tokens'))
  const few = await serve(t, { API_TOKENS_FILE: tokenFile(dir, 2).path })
  const manyTokens = tokenFile(dir, MANY)
  const many = await serve(t, { API_TOKENS_FILE: manyTokens.path })
  const statusWith = async (token: string): Promise<number> => (await request(`${many.url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: '{"id":1,"name":"Fern"}'
  })).status
  t.same([await statusWith(manyTokens.tokens[0] as string), await statusWith(manyTokens.tokens[MANY - 1] as string)], [200, 200], 'the first and the last of 6,000 tokens are found')
  // Warm both (JIT, connections), then measure them in turn.
  await median401(few.url, 100, 8)
  await median401(many.url, 100, 8)
  // In turn, three times each; the least median of each, since a shared
  // machine only ever adds time.
  const medians: { few: number[], many: number[] } = { few: [], many: [] }
  for (let round = 0; round < 3; round++) {
    medians.few.push(await median401(few.url, 300, 32))
    medians.many.push(await median401(many.url, 300, 32))
  }
  const withFew = Math.min(...medians.few)
  const withMany = Math.min(...medians.many)
  t.comment(`401 p50, 32 concurrent: ${withFew.toFixed(2)} ms with 2 tokens, ${withMany.toFixed(2)} ms with ${MANY} (medians ${JSON.stringify(medians, (_k, v: unknown) => typeof v === 'number' ? Math.round(v * 100) / 100 : v)})`)
  // A figure, not a bound: over HTTP the lookup is a sliver of a 401's cost
  // and a round's median swung 2x on a busy machine, so a bound here was a
  // speed target (bench/RESULTS.md has the figure). That the cost does not
  // grow with the tokens is asserted on the lookup itself, in
  // test/api/auth.test.ts. median401 throws on any answer but 401.
  t.pass(`every wrong token answered 401, with 2 and with ${MANY} tokens`)
})

t.test('the rate limit keeps a window for each of 6,000 callers', async (t) => {
  const { path, tokens } = tokenFile(dirname(tempDataDir(t, 'tokens')), MANY)
  const server = await serve(t, { API_TOKENS_FILE: path, RATE_LIMIT_PER_MINUTE: '2' })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })
  t.teardown(() => agent.destroy())
  let id = 0
  const create = async (token: string): Promise<number> => (await request(`${server.url}/plants`, {
    method: 'POST',
    agent,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id: ++id, name: 'Fern' })
  })).status

  const [a, ...others] = tokens as [string, ...string[]]
  t.same([await create(a), await create(a), await create(a)], [200, 200, 429], 'token A: two creates, then 429')
  let next = 0
  const counts = new Map<number, number>()
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < others.length) {
      const status = await create(others[next++] as string)
      counts.set(status, (counts.get(status) ?? 0) + 1)
    }
  }))
  t.same(Object.fromEntries(counts), { 200: MANY - 1 }, 'every other token created once')
  const after = [await create(a), await create(a)]
  t.comment(`token A after the others: ${after.join(', ')}`)
  t.same(after, [429, 429], 'token A is still limited in the same minute')
})
