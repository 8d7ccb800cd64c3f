// What a wrong token costs with 6,000 static tokens configured beside 2: the median time of a 401, 32 requests at
// a time on kept-alive connections, three rounds each, in turn, in real server processes. Finding a token is one
// SHA-256 digest and one lookup whatever their number (plugins/auth.ts, staticCallers); test/api/auth.test.ts
// checks the lookup itself, and test/process/many-tokens.test.ts that 6,000 tokens all work. Over HTTP the lookup
// is a sliver of a 401's cost, and a round's median swings twofold on a busy machine, so this prints a figure
// (bench/RESULTS.md) instead of asserting a bound.
//
//   npx tsx bench/many-tokens.ts
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from '../test/support/http.js'
import { startServerProcess } from '../test/support/processes.js'

const MANY = 6000
const ROUNDS = 3

function tokenFile (dir: string, count: number): string {
  const path = join(dir, `tokens-${count}`)
  writeFileSync(path, Array.from({ length: count }, (_, i) => `caller-${i} ${randomBytes(24).toString('base64url')}`).join('\n') + '\n')
  return path
}

// The median milliseconds of `count` creates with a wrong token, `concurrency` at a time.
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

const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-tokens-'))
const cleanups: Array<() => unknown> = [() => rmSync(dir, { recursive: true, force: true })]
const teardown = { teardown: (fn: () => unknown) => { cleanups.push(fn) } }
try {
  const few = await startServerProcess({ env: { API_TOKENS_FILE: tokenFile(dir, 2) } })
  teardown.teardown(() => few.stop())
  const many = await startServerProcess({ env: { API_TOKENS_FILE: tokenFile(dir, MANY) }, startTimeoutMs: 60_000 })
  teardown.teardown(() => many.stop())
  // Warm both (JIT, connections), then measure them in turn; the least median of each, as a shared machine only
  // ever adds time.
  await median401(few.url, 100, 8)
  await median401(many.url, 100, 8)
  const medians: { few: number[], many: number[] } = { few: [], many: [] }
  for (let round = 0; round < ROUNDS; round++) {
    medians.few.push(await median401(few.url, 300, 32))
    medians.many.push(await median401(many.url, 300, 32))
  }
  const rounded = (ms: number[]): string => ms.map((m) => m.toFixed(2)).join(', ')
  process.stdout.write(`401 p50, 32 concurrent: ${Math.min(...medians.few).toFixed(2)} ms with 2 tokens, ` +
    `${Math.min(...medians.many).toFixed(2)} ms with ${MANY} (rounds: ${rounded(medians.few)} / ${rounded(medians.many)})\n`)
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup()
}
