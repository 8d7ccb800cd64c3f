// The container's health probe (slim images have no curl): `live` for the image's HEALTHCHECK, `ready` for
// compose's, as the Dockerfile explains. Exit 0 on 200, 1 otherwise, within a bound of its own.
const probe = process.argv[2] ?? 'ready'
if (probe !== 'live' && probe !== 'ready') {
  process.stderr.write(`healthcheck: expected "live" or "ready", got "${probe}"\n`)
  process.exit(2)
}
const url = `http://127.0.0.1:${process.env.PORT ?? '3000'}/health/${probe}`
const res = await fetch(url, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined)
process.exitCode = res?.ok === true ? 0 : 1
