// The container's health probe: slim images have no curl, so Node asks the
// service itself. `node dist/src/bin/healthcheck.js live` asks /health/live (the
// image's HEALTHCHECK), `… ready` asks /health/ready (compose's healthcheck,
// what depends_on waits for); the Dockerfile says why they differ. Exit 0 on
// 200, 1 otherwise, within a bound the engine's own timeout does not need to
// enforce.
const probe = process.argv[2] ?? 'ready'
if (probe !== 'live' && probe !== 'ready') {
  process.stderr.write(`healthcheck: expected "live" or "ready", got "${probe}"\n`)
  process.exit(2)
}
const port = process.env.PORT ?? '3000'
const url = `http://127.0.0.1:${port}/health/${probe}`

try {
  const res = await fetch(url, { signal: AbortSignal.timeout(2_000) })
  process.exitCode = res.ok ? 0 : 1
} catch {
  process.exitCode = 1
}
