// The container's health probe (slim images have no curl): `live` for the
// image's HEALTHCHECK, `ready` for compose's, as the Dockerfile explains.
// Exit 0 on 200, 1 otherwise, within a bound of its own.
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
