import pino from 'pino'
import { ConfigError, databaseConfig, preparePgliteDataDir, readEnv } from '../config.js'
import { openDatabase } from '../store/open-database.js'
import { migrate } from '../store/migrations.js'

// `npm run migrate`: applies migrations/ to the configured database and exits non-zero when anything fails.
const log = pino({ level: 'info' })
try {
  const env = readEnv()
  const database = databaseConfig(env)
  preparePgliteDataDir(database)
  const db = await openDatabase(database, { timeoutMs: env.DB_TIMEOUT_MS, log })
  const { applied, version } = await migrate(db).finally(async () => await db.close())
  log.info({ applied, version, database: db.kind }, applied.length > 0 ? 'migrations applied' : 'schema up to date')
} catch (err) {
  if (err instanceof ConfigError) process.stderr.write(`plant-store: ${err.message}\n`)
  else log.error({ err }, 'migration failed')
  process.exitCode = 1
}
