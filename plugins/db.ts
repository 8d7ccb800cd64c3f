import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Config } from '../src/config.js'
import type { Db } from '../src/store/db.js'
import { openPostgres } from '../src/store/postgres.js'
import { openPglite } from '../src/store/pglite.js'
import { migrate } from '../src/store/migrate.js'
import { isUnavailable, StoreUnavailableError } from '../src/store/errors.js'
import { createPlantStore, type BatchWriterOptions, type PlantStore } from '../src/store/plant-store.js'
import { withDeadline } from '../src/store/deadline.js'

export interface DbPluginOptions {
  config: Pick<Config, 'database' | 'dbTimeoutMs'>
  // PostgreSQL only: listen at once and migrate in the background, retrying
  // with backoff while the database is unreachable. Called when a migration
  // fails for a reason waiting will not fix.
  background?: { onFatal: (err: unknown) => void }
  // Batch size, queue bound and writers in flight; defaults suit production.
  writer?: BatchWriterOptions
}

export interface StoreHandle {
  db: Db
  plants: PlantStore
  // Resolves once migrations are applied.
  migrated: Promise<void>
  isMigrated(): boolean
  // The database answers within the timeout and migrations are applied.
  isReady(): Promise<boolean>
}

declare module 'fastify' {
  interface FastifyInstance {
    store: StoreHandle
  }
}

const BACKOFF_START_MS = 250
const BACKOFF_MAX_MS = 10_000

async function dbPlugin (fastify: FastifyInstance, opts: DbPluginOptions): Promise<void> {
  const { database, dbTimeoutMs } = opts.config
  const log = fastify.log.child({ component: 'db' })
  const db = database.kind === 'postgres'
    ? openPostgres({ url: database.url, timeoutMs: dbTimeoutMs, log })
    : await openPglite(database.dataDir)
  let closing = false
  let migrated = false

  const migrateWithRetry = async (): Promise<void> => {
    let delay = BACKOFF_START_MS
    for (;;) {
      try {
        const { applied, version } = await migrate(db)
        migrated = true
        log.info({ applied, version, database: db.kind }, applied.length > 0 ? 'migrations applied' : 'schema up to date')
        return
      } catch (err) {
        if (closing || !isUnavailable(err) || opts.background === undefined) throw err
        log.warn({ err, retryInMs: delay }, 'database unavailable; retrying migrations')
        await sleep(delay)
        delay = Math.min(delay * 2, BACKOFF_MAX_MS)
      }
    }
  }

  const migration = migrateWithRetry()
  if (opts.background === undefined) {
    try {
      await migration
    } catch (err) {
      await db.close().catch(() => {})
      throw err
    }
  } else {
    const { onFatal } = opts.background
    migration.catch((err: unknown) => { if (!closing) onFatal(err) })
  }

  const store = createPlantStore(db, opts.writer)
  const handle: StoreHandle = {
    db,
    migrated: migration,
    isMigrated: () => migrated,
    plants: {
      async create (plant) {
        if (!migrated) throw new StoreUnavailableError('The database is not ready yet')
        return await withDeadline(store.create(plant), dbTimeoutMs, 'create')
      }
    },
    async isReady () {
      if (!migrated) return false
      try {
        await withDeadline(db.query('SELECT 1'), dbTimeoutMs, 'readiness check')
        return true
      } catch (err) {
        // Asked by every probe: at debug. An outage shows at warn where it
        // matters, in the creates it refuses and the migration retries.
        log.debug({ err }, 'readiness check failed')
        return false
      }
    }
  }
  fastify.decorate('store', handle)

  fastify.addHook('onClose', async () => {
    closing = true
    await db.close()
  })
}

export default fp(dbPlugin, { name: 'db', fastify: '5.x' })
