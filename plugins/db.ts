import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Config } from '../src/config.js'
import type { Db } from '../src/store/db.js'
import { openDatabase } from '../src/store/open-database.js'
import { migrate } from '../src/store/migrations.js'
import { DATABASE_MISSING, isUnavailable, sqlState } from '../src/store/store-errors.js'
import { createPlantStore, type PlantStore, type WriterOptions } from '../src/store/plant-store.js'

export interface DbPluginOptions {
  config: Pick<Config, 'database' | 'dbTimeoutMs'>
  // PostgreSQL only: listen at once and migrate in the background, retrying with backoff while the database is
  // unreachable. Called when a migration fails for a reason waiting will not fix.
  background?: { onFatal: (err: unknown) => void }
  writer?: WriterOptions
  // A store that is already open, decorated as it is instead of opening config.database (for tests of what never
  // reaches a stored row). The app closes its db when it closes.
  store?: OpenStore
}

export interface OpenStore { db: Db, plants: PlantStore }

declare module 'fastify' {
  interface FastifyInstance {
    db: Db
    plants: PlantStore
  }
}

const BACKOFF_START_MS = 250
const BACKOFF_MAX_MS = 10_000

async function dbPlugin (fastify: FastifyInstance, opts: DbPluginOptions): Promise<void> {
  if (opts.store !== undefined) {
    decorateStore(fastify, opts.store)
    return
  }
  const { database, dbTimeoutMs } = opts.config
  const log = fastify.log.child({ component: 'db' })
  const db = await openDatabase(database, { timeoutMs: dbTimeoutMs, log })
  let closing = false
  const plants = createPlantStore(db, { timeoutMs: dbTimeoutMs, migrated: false, log, writer: opts.writer })

  const migrateWithRetry = async (): Promise<void> => {
    let delay = BACKOFF_START_MS
    for (;;) {
      try {
        const { applied, version } = await migrate(db)
        plants.markMigrated()
        log.info({ applied, version, database: db.kind }, applied.length > 0 ? 'migrations applied' : 'schema up to date')
        return
      } catch (err) {
        if (closing || !isUnavailable(err) || opts.background === undefined) throw err
        if (sqlState(err) === DATABASE_MISSING) {
          log.warn({ code: DATABASE_MISSING, retryInMs: delay }, 'the database named in DATABASE_URL does not exist yet; retrying')
        } else {
          log.warn({ err, retryInMs: delay }, 'database unavailable; retrying migrations')
        }
        await sleep(delay)
        delay = Math.min(delay * 2, BACKOFF_MAX_MS)
      }
    }
  }

  const migration = migrateWithRetry()
  if (opts.background === undefined) {
    await migration.catch(async (err: unknown) => {
      await db.close().catch(() => {})
      throw err
    })
  } else {
    migration.catch((err: unknown) => { if (!closing) opts.background?.onFatal(err) })
  }

  decorateStore(fastify, { db, plants }, () => { closing = true })
}

function decorateStore (fastify: FastifyInstance, { db, plants }: OpenStore, closing?: () => void): void {
  fastify.decorate('db', db)
  fastify.decorate('plants', plants)
  fastify.addHook('onClose', async () => {
    closing?.()
    await db.close()
  })
}

export default fp(dbPlugin, { name: 'db', fastify: '5.x' })
