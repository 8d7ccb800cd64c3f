import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { freePort, jsonLines, stageRuntime, startBuiltServer } from '../support/processes.js'
import { openSlowUpload } from '../support/slow-client.js'

// server.ts drains in-flight requests for this long after SIGTERM.
const SHUTDOWN_GRACE_MS = 5_000

// `docker stop` sends SIGTERM and, 10 s later, SIGKILL. A client that never
// finishes its request must not hold the process past that: the drain is
// bounded, the connection closed, and the exit is still 0.
const DOCKER_STOP_TIMEOUT_MS = 10_000
const TOKEN = 'stop-test-token-81c2'

t.test('SIGTERM with a slow upload open: exit 0 inside docker stop\'s 10 s', async (t) => {
  const runtime = await stageRuntime()
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-stop-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const port = await freePort()
  const server = startBuiltServer(t, runtime, {
    NODE_ENV: 'production', HOST: '127.0.0.1', PORT: String(port), API_TOKENS: TOKEN, PGLITE_DATA_DIR: join(dir, 'pglite')
  })
  await server.waitFor(`http://127.0.0.1:${port}/health/ready`)

  const slow = await openSlowUpload(port, TOKEN)
  t.teardown(() => slow.destroy())
  const signalled = performance.now()
  server.signal('SIGTERM')
  const exit = await server.exited
  const stopMs = performance.now() - signalled
  t.same(exit, { code: 0, signal: null }, 'exit code 0')
  t.ok(stopMs >= SHUTDOWN_GRACE_MS - 100, `the slow request had the whole drain bound (${Math.round(stopMs)} ms)`)
  t.ok(stopMs < DOCKER_STOP_TIMEOUT_MS, `stopped before the engine would kill it (${Math.round(stopMs)} ms)`)
  const { response } = await slow.closed
  t.equal(response, '', 'the cut-off request got no answer, so it was told nothing')

  const { lines } = jsonLines(server.stdout())
  t.ok(lines.some((l) => l.msg === 'drain bound reached: closing the remaining connections'), 'it says why it closed connections')
  t.ok(lines.some((l) => l.msg === 'stopped'), 'it logged that it stopped')
  t.notOk(server.stdout().includes('killed by timeout'), 'never the last-resort exit')
})
