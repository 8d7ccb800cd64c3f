// The container's health probe (Dockerfile HEALTHCHECK, compose healthcheck):
// slim images have no curl, so Node asks /health/ready itself. Exit 0 when
// ready, 1 otherwise, within a bound the engine's own timeout does not need
// to enforce.
const port = process.env.PORT ?? '3000'
const url = `http://127.0.0.1:${port}/health/ready`

try {
  const res = await fetch(url, { signal: AbortSignal.timeout(2_000) })
  process.exitCode = res.ok ? 0 : 1
} catch {
  process.exitCode = 1
}
