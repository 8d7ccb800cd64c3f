import closeWithGrace from 'close-with-grace'
import type { FastifyInstance } from 'fastify'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { checkHost, ConfigError, listenError, loadConfig, preparePgliteDataDir, type Config } from './src/config.js'
import { buildApp } from './app.js'
import { EXAMPLE_PLANT } from './src/schemas.js'
import { flushLog, logDestination, loggerOptions } from './src/logger.js'

// The only file that listens, and closes on a signal. In-flight requests get a grace well inside `docker stop`'s
// 10 s; a client cut off got no answer, so it retries (creates are idempotent) and nothing it was told is lost.
const SHUTDOWN_GRACE_MS = 5_000
// Should closing hang even with every connection gone (close-with-grace then exits 1).
const SHUTDOWN_HARD_LIMIT_MS = 8_000

// Written in the background: every way out of the process waits for them first.
const logs = logDestination()

async function fail (message: string): Promise<never> {
  await flushLog(logs)
  process.stderr.write(`plant-store: ${message}\n`)
  process.exit(1)
}

let loaded: ReturnType<typeof loadConfig>
try {
  loaded = loadConfig()
  preparePgliteDataDir(loaded.config.database)
  await checkHost(loaded.config.host)
  await checkPorts(loaded.config)
} catch (err) {
  if (err instanceof ConfigError) await fail(err.message)
  throw err
}
const { config, generatedToken } = loaded

const onFatal = (err: unknown): void => {
  app.log.fatal({ err }, 'migrations failed; stopping')
  flushLog(logs).finally(() => process.exit(1)).catch(() => {})
}
const app = await buildApp({
  config,
  logger: loggerOptions(config, logs),
  ...(config.database.kind === 'postgres' ? { background: { onFatal } } : {})
}).catch(async (err: unknown) => {
  // A ConfigError here is the embedded database's directory in use.
  return await fail(err instanceof ConfigError ? err.message : `start-up failed: ${err instanceof Error ? err.message : String(err)}`)
})

// close-with-grace reports a timeout or a second signal through pino, as JSON lines.
const graceLogger = { error: (msg: unknown) => app.log.error(msg instanceof Error ? { err: msg } : { msg: String(msg) }) }

closeWithGrace({ delay: SHUTDOWN_HARD_LIMIT_MS, logger: graceLogger }, async ({ signal, err }) => {
  if (err !== undefined) app.log.error({ err }, 'closing after an error')
  else app.log.info({ signal }, 'shutting down: finishing in-flight requests')
  await closeWithinGrace(app, SHUTDOWN_GRACE_MS)
  app.log.info('stopped')
  // close-with-grace exits as soon as this resolves.
  await flushLog(logs)
})

try {
  const address = await app.listen({ port: config.port, host: config.host })
  if (generatedToken !== undefined) {
    await flushLog(logs) // not in the middle of the log lines written so far
    // Outside the JSON log, for a person trying the service.
    process.stdout.write(
      `\nNo API_TOKENS configured: generated a token for this run.\n  Token: ${generatedToken}\n` +
      `  Try:   curl -X POST ${address}/plants -H 'Authorization: Bearer ${generatedToken}' ` +
      `-H 'Content-Type: application/json' -d '${JSON.stringify(EXAMPLE_PLANT)}'\n  Docs:  ${address}/docs\n\n`
    )
  }
} catch (err) {
  const message = listenFailure(err)
  await app.close().catch(() => {})
  await fail(message)
}

// A port taken since checkPorts, or an address that is not this machine's: its one line, as checkPorts gives it (the
// metrics listener names its own variable). Anything else is unexpected, and its stack goes to the log first.
function listenFailure (err: unknown): string {
  if (err instanceof ConfigError) return err.message
  if ((err as NodeJS.ErrnoException).syscall === 'listen') return listenError('PORT', config.host, config.port, err).message
  app.log.fatal({ err }, 'cannot listen')
  return `start-up failed: ${err instanceof Error ? err.message : String(err)}`
}

// Before the database is opened, as checkHost: a port in use, or a HOST that is not this machine's, stops start-up
// with its one line before any migration runs or any log line is written. Port 0 (any free port) cannot be taken.
async function checkPorts ({ host, port, metricsPort }: Config): Promise<void> {
  for (const [variable, wanted] of [['PORT', port], ['METRICS_PORT', metricsPort]] as const) {
    if (wanted === undefined || wanted === 0) continue
    const probe = createServer()
    await once(probe.listen({ port: wanted, host }), 'listening').catch((err: unknown) => {
      throw listenError(variable, host, wanted, err)
    })
    await new Promise((resolve) => probe.close(resolve))
  }
}

// Past graceMs the remaining connections are closed so the server's close, and then the database's, can finish.
async function closeWithinGrace (app: FastifyInstance, graceMs: number): Promise<void> {
  const timer = setTimeout(() => {
    app.log.warn({ graceMs }, 'drain bound reached: closing the remaining connections')
    app.server.closeAllConnections()
  }, graceMs)
  await app.close().finally(() => clearTimeout(timer))
}
