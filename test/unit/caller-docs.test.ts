import t from 'tap'
import { readFile } from 'node:fs/promises'
import { buildStubApp } from '../helper.js'

// docs/api.md is where callers read what the service promises; the README
// points there (test/unit/doc-links.test.ts checks the links).

const read = async (path: string) => await readFile(new URL(`../../${path}`, import.meta.url), 'utf8')

// With an issuer and a rate limit, the served document lists every status POST /plants can answer.
const AUTH = { issuer: 'http://127.0.0.1:9/', audience: 'plant-store', requiredScope: 'plants:write', clockSkewS: 30, maxClients: 10 }

t.test('docs/api.md covers every documented status and header', async (t) => {
  const api = await read('docs/api.md')
  const { app } = await buildStubApp(t, { auth: AUTH, rateLimitPerMinute: 10 })
  const doc = JSON.parse((await app.inject({ method: 'GET', url: '/openapi.json' })).body) as { paths: Record<string, { post: { responses: object } }> }
  const statuses = Object.keys(doc.paths['/plants']?.post.responses ?? {})
  t.ok(statuses.includes('403') && statuses.includes('429'), `all configured: ${statuses.join(', ')}`)
  for (const status of statuses) {
    t.match(api, new RegExp(`^\\| ${status} \\|`, 'm'), `${status} has a row`)
  }
  for (const header of ['X-Request-Id', 'Retry-After', 'WWW-Authenticate', 'Allow']) {
    t.match(api, `| \`${header}\` |`, `${header} has a row`)
  }
  t.match(api, 'JSON.rawJSON', 'the int64 caveat for JavaScript')
  t.match(api, 'Error as PlantStoreError', 'the import alias for generated code')
})

t.test('the README\'s curl sets TOKEN before it uses it', async (t) => {
  const readme = await read('README.md')
  const use = readme.indexOf('Bearer $TOKEN')
  const set = readme.search(/^TOKEN=/m)
  t.ok(set !== -1 && set < use, 'TOKEN= comes first')
})

t.test('docs/api.md names the generator versions the lock file pins and the test runs', async (t) => {
  const api = await read('docs/api.md')
  const pkg = JSON.parse(await read('package.json')) as { devDependencies: Record<string, string> }
  t.match(api, `**hey-api** (\`@hey-api/openapi-ts\` ${pkg.devDependencies['@hey-api/openapi-ts']})`)
  t.match(api, `**orval** (${pkg.devDependencies.orval})`)
})

// The README is the newcomer's page: what to run and where to read on. It is
// held to 10 KiB; the detail lives in docs/.
t.test('the README stays within 10 KiB and keeps the set-up and test commands', async (t) => {
  const readme = await read('README.md')
  t.ok(Buffer.byteLength(readme) <= 10 * 1024, `${Buffer.byteLength(readme)} bytes`)
  for (const command of ['npm ci', 'npm start', 'npm test']) t.match(readme, new RegExp(`^${command}\\b|\`${command}\``, 'm'), command)
})
