import t, { type Test } from 'tap'
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { request } from '../support/http.js'
import { startServerProcess, type SourceServer } from '../support/processes.js'
import { tempDataDir } from '../support/temp-dir.js'

// Thousands of static tokens, named as API_TOKENS_FILE lines may name them, in a real server process: each is
// found, and the rate limit keeps a window for every configured caller.

const MANY = 6000

function tokenFile (dir: string, count: number): { path: string, tokens: string[] } {
  const tokens = Array.from({ length: count }, () => randomBytes(24).toString('base64url'))
  const path = join(dir, `tokens-${count}`)
  writeFileSync(path, tokens.map((token, i) => `caller-${i} ${token}`).join('\n') + '\n')
  return { path, tokens }
}

async function serve (t: Test, env: Record<string, string>): Promise<SourceServer> {
  const server = await startServerProcess({ env, startTimeoutMs: 60_000 })
  t.teardown(() => server.stop())
  return server
}

// What a wrong token costs beside 2 tokens is a figure, not a bound: bench/many-tokens.ts prints it.
t.test('6,000 tokens: the first and the last are found, a wrong one gets 401', async (t) => {
  const { path, tokens } = tokenFile(dirname(tempDataDir(t, 'tokens')), MANY)
  const server = await serve(t, { API_TOKENS_FILE: path })
  const statusWith = async (token: string): Promise<number> => (await request(`${server.url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: '{"id":1,"name":"Fern"}'
  })).status
  t.same([await statusWith(tokens[0] as string), await statusWith(tokens[MANY - 1] as string)], [200, 200], 'the first and the last of 6,000 tokens are found')
  t.equal(await statusWith(randomBytes(24).toString('base64url')), 401, 'a token that is not one of them is refused')
  t.equal(await statusWith(`${tokens[0] as string}x`), 401, 'nor is one of them with a byte added')
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
