import type { BaseLogger } from 'pino'
import type { Config } from '../config.js'
import type { Db } from './db.js'
import { openPostgres } from './postgres.js'

// The configured database. The embedded one is the folder pglite/, loaded only when it is the one configured:
// deleting that folder and this import drops it.
export async function openDatabase (database: Config['database'], opts: { timeoutMs: number, log: Pick<BaseLogger, 'warn'> }): Promise<Db> {
  if (database.kind === 'postgres') return openPostgres({ url: database.url, ...opts })
  return await (await import('./pglite/index.js')).openPglite(database.dataDir)
}
