import t from 'tap'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

// The "Where each rule lives" table in docs/architecture.md is how a reader
// finds a rule's home and its tests: every file it names must exist, and
// every function it names in brackets after a file must be in that file, so
// a move or a rename that forgets the table fails here.
const root = fileURLToPath(new URL('../../', import.meta.url))
const architecture = readFileSync(`${root}docs/architecture.md`, 'utf8')

interface Named { path: string, names: string[] }

// `path` optionally followed by "(a, b)"; only plain identifiers in the
// brackets are names (a phrase such as "(the truthful deadline)" is not).
function namedIn (cell: string): Named[] {
  return [...cell.matchAll(/`([^`]+)`(?:\s*\(([^)]*)\))?/g)].map(([, path, inBrackets]) => ({
    path: path as string,
    names: (inBrackets ?? '').split(',').map((n) => n.trim()).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n))
  }))
}

function ruleRows (): Array<{ rule: string, cells: string[] }> {
  const start = architecture.indexOf('## Where each rule lives')
  const end = architecture.indexOf('\n#', start + 1)
  const section = architecture.slice(start, end === -1 ? undefined : end)
  return section.split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| rule ') && !line.startsWith('|---'))
    .map((line) => {
      const [rule = '', ...cells] = line.slice(2, -2).split(' | ')
      return { rule, cells }
    })
}

t.test('the table is there and has rows of a rule, its files and its tests', async (t) => {
  t.match(architecture, /^## Where each rule lives$/m, 'the heading')
  const rows = ruleRows()
  t.ok(rows.length >= 30, `${rows.length} rules`)
  for (const { rule, cells } of rows) t.equal(cells.length, 2, rule)
})

t.test('every file the table names exists, with the functions named beside it', async (t) => {
  for (const { rule, cells } of ruleRows()) {
    for (const { path, names } of cells.flatMap(namedIn)) {
      t.ok(existsSync(`${root}${path}`), `${path} (${rule})`)
      if (names.length === 0 || !existsSync(`${root}${path}`) || statSync(`${root}${path}`).isDirectory()) continue
      const text = readFileSync(`${root}${path}`, 'utf8')
      for (const name of names) t.match(text, new RegExp(`\\b${name.replace('$', '\\$')}\\b`), `${name} in ${path}`)
    }
  }
})

t.test('the check can fail: a missing file and a missing name are caught', async (t) => {
  const [missing] = namedIn('`src/no-such-file.ts` (nothing)')
  t.notOk(existsSync(`${root}${missing?.path ?? ''}`))
  t.same(namedIn('`src/a.ts` (one, two), `b/` (a phrase here)'), [
    { path: 'src/a.ts', names: ['one', 'two'] },
    { path: 'b/', names: [] }
  ])
})
