import t from 'tap'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { loadConfig } from '../../src/config.js'

// Secrets as docker compose mounts them: one file each under /run/secrets.
const dir = mkdtempSync(join(tmpdir(), 'plant-secrets-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const file = (name: string, content: string): string => {
  const path = join(dir, name)
  writeFileSync(path, content)
  return path
}
const postgresUrl = (env: Record<string, string>): string => {
  const { database } = loadConfig({ API_TOKENS: 'a', ...env }).config
  if (database.kind !== 'postgres') throw new Error('expected PostgreSQL')
  return database.url
}

t.test('API_TOKENS_FILE: one token a line; comment lines and blank lines are not tokens', async (t) => {
  const path = file('tokens', '# rotated 2026-11\n  first-token  \n\n# next one\r\nsecond-token\r\n')
  t.same(loadConfig({ API_TOKENS_FILE: path, NODE_ENV: 'production' }).config.apiTokens, ['first-token', 'second-token'])
  t.throws(() => loadConfig({ API_TOKENS_FILE: file('comments', '# only a comment\n'), NODE_ENV: 'production' }), /^API_TOKENS_FILE: .* holds no token/)
})

t.test('DATABASE_PASSWORD_FILE puts the password into DATABASE_URL as pg reads it', async (t) => {
  const password = 'p@ss:w/rd %41 é#?'
  const url = postgresUrl({ DATABASE_URL: 'postgres://plants@db:5432/plants', DATABASE_PASSWORD_FILE: file('pw', `${password}\n`) })
  const client = new pg.Client({ connectionString: url })
  t.same({ user: client.user, password: client.password, host: client.host, port: client.port, database: client.database },
    { user: 'plants', password, host: 'db', port: 5432, database: 'plants' }, 'pg reads every character back; the line break is dropped')
  t.equal(postgresUrl({ DATABASE_URL: 'postgres://plants@db:5432/plants', DATABASE_PASSWORD_FILE: file('crlf', 'secret\r\n\r\n') }),
    'postgres://plants:secret@db:5432/plants', 'trailing line breaks are dropped, as the postgres image does')
  t.equal(postgresUrl({ DATABASE_URL: 'postgres://plants@db:5432/plants' }), 'postgres://plants@db:5432/plants', 'without the file the URL is as given')
  t.same(loadConfig({ API_TOKENS: 'a', DATABASE_PASSWORD_FILE: file('unused', 'x') }).config.database,
    { kind: 'pglite', dataDir: './.data/pglite' }, 'without DATABASE_URL it does not apply')
})

t.test('a DATABASE_PASSWORD_FILE that cannot serve stops start-up naming it', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ DATABASE_PASSWORD_FILE: join(dir, 'missing') }, /^DATABASE_PASSWORD_FILE: cannot read .*ENOENT/],
    [{ DATABASE_PASSWORD_FILE: file('empty', '\n') }, /^DATABASE_PASSWORD_FILE: .* holds no password/],
    [{ DATABASE_PASSWORD_FILE: file('both', 'x'), DATABASE_URL: 'postgres://plants:inline@db/plants' }, /^DATABASE_PASSWORD_FILE: DATABASE_URL already holds a password/],
    [{ DATABASE_PASSWORD_FILE: file('nouser', 'x'), DATABASE_URL: 'postgres://db/plants' }, /^DATABASE_PASSWORD_FILE: DATABASE_URL names no user/]
  ]
  for (const [env, pattern] of cases) {
    t.throws(() => postgresUrl({ DATABASE_URL: 'postgres://plants@db:5432/plants', ...env }), pattern)
  }
})
