// npm run openapi: regenerates openapi.json, the committed contract, from
// the app itself. The document does not depend on the database or the
// tokens, so a throwaway in-memory database and token do.
import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { buildApp } from '../app.js'
import { servedOpenapi } from './openapi-document.js'

const target = fileURLToPath(new URL('../openapi.json', import.meta.url))

const app = await buildApp({
  config: {
    port: 0,
    host: '127.0.0.1',
    database: { kind: 'pglite', dataDir: 'memory://' },
    apiTokens: ['openapi-generation-only'],
    bodyLimit: 1048576,
    logLevel: 'silent',
    dbTimeoutMs: 5000,
    production: false
  }
})
try {
  await app.ready()
  await writeFile(target, await servedOpenapi(app))
  process.stdout.write(`wrote ${target}\n`)
} finally {
  await app.close()
}
