import t from 'tap'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

// The "Where each rule lives" table in docs/architecture.md is how a reader finds a rule's home and its tests.
// Every file it names must exist; every function it names in brackets after a file must be defined in that file's
// code (a mention in a comment is not enough); and every test file a row names must mention the row's rule, so a
// move, a rename or a test listed under the wrong rule fails here.
const root = fileURLToPath(new URL('../../', import.meta.url))
const architecture = readFileSync(`${root}docs/architecture.md`, 'utf8')

interface Named { path: string, names: string[] }
interface Row { rule: string, files: string, tests: string }

// `path` optionally followed by "(a, b)". Only plain identifiers in the brackets are names: a phrase such as
// "(the truthful deadline)" is not.
function namedIn (cell: string): Named[] {
  return [...cell.matchAll(/`([^`]+)`(?:\s*\(([^)]*)\))?/g)].map(([, path, inBrackets]) => ({
    path: path as string,
    names: (inBrackets ?? '').split(',').map((n) => n.trim()).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n))
  }))
}

function ruleRows (): Row[] {
  const start = architecture.indexOf('## Where each rule lives')
  const end = architecture.indexOf('\n#', start + 1)
  const section = architecture.slice(start, end === -1 ? undefined : end)
  return section.split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| rule ') && !line.startsWith('|---'))
    .map((line) => {
      const [rule = '', files = '', tests = '', ...more] = line.slice(2, -2).split(' | ')
      if (more.length > 0) throw new Error(`a row of more than three cells: ${rule}`)
      return { rule, files, tests }
    })
}

// A file's code without its comments: // and /* */ in TypeScript, # in shell, YAML and configuration files.
function codeOf (path: string, text: string): string {
  if (path.endsWith('.json')) return text
  if (/\.[cm]?[jt]s$/.test(path)) return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|\s)\/\/.*$/gm, '$1')
  return text.replace(/(^|\s)#.*$/gm, '$1')
}

// Whether code defines `name`: declares it, defines it as a method or a property, assigns it, or names it as a
// string (an event, a hook, a package.json script).
export function defines (code: string, name: string): boolean {
  const n = name.replace('$', '\\$')
  return [
    new RegExp(`\\b(?:function\\*?|class|interface|type|const|let|var|enum)\\s+${n}\\b`),
    new RegExp(`^\\s*(?:(?:async|static|override|readonly|private|public|get|set)\\s+)*${n}\\s*[(<]`, 'm'),
    new RegExp(`(?<![\\w$.])${n}\\s*(?::|=(?!=))`),
    new RegExp(`['"\`]${n}['"\`]`)
  ].some((pattern) => pattern.test(code))
}

// What a test must hold to mention a row's rule: one of the rule's `code` terms (case aside), one of the statuses
// it names, or one of the functions named beside its files.
export function ruleMarks ({ rule, files }: Pick<Row, 'rule' | 'files'>): RegExp[] {
  const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const terms = [...rule.matchAll(/`([^`]+)`/g)].map(([, term]) => new RegExp(escape(term as string), 'i'))
  const statuses = [...rule.matchAll(/\b([1-5]\d\d)\b/g)].map(([, status]) => new RegExp(`(?<![\\d.])${status as string}(?![\\d.])`))
  const names = namedIn(files).flatMap(({ names }) => names).map((name) => new RegExp(`\\b${escape(name)}\\b`))
  return [...terms, ...statuses, ...names]
}

t.test('the table is there and has rows of a rule, its files and its tests', async (t) => {
  t.match(architecture, /^## Where each rule lives$/m, 'the heading')
  const rows = ruleRows()
  t.ok(rows.length >= 30, `${rows.length} rules`)
  for (const { rule, files, tests } of rows) t.ok(files !== '' && tests !== '', rule)
})

t.test('every file the table names exists, and defines the functions named beside it', async (t) => {
  for (const { rule, files, tests } of ruleRows()) {
    for (const { path, names } of [...namedIn(files), ...namedIn(tests)]) {
      t.ok(existsSync(`${root}${path}`), `${path} (${rule})`)
      if (names.length === 0 || !existsSync(`${root}${path}`) || statSync(`${root}${path}`).isDirectory()) continue
      const code = codeOf(path, readFileSync(`${root}${path}`, 'utf8'))
      for (const name of names) t.ok(defines(code, name), `${name} is defined in ${path}`)
    }
  }
})

t.test('every test a row names mentions its rule', async (t) => {
  for (const row of ruleRows()) {
    const marks = ruleMarks(row)
    t.ok(marks.length > 0, `the rule has a term, a status or a function to look for: ${row.rule}`)
    for (const { path } of namedIn(row.tests)) {
      if (!existsSync(`${root}${path}`) || statSync(`${root}${path}`).isDirectory()) continue
      const text = readFileSync(`${root}${path}`, 'utf8')
      const found = marks.find((mark) => mark.test(text))
      t.ok(found, `${path} mentions "${row.rule.slice(0, 70)}"${found === undefined ? '' : ` (${found.source})`}`)
    }
  }
})

t.test('the checks can fail', async (t) => {
  t.same(namedIn('`src/a.ts` (one, two), `b/` (a phrase here)'), [
    { path: 'src/a.ts', names: ['one', 'two'] },
    { path: 'b/', names: [] }
  ])
  const code = codeOf('x.ts', '// settle runs the batch\nconst other = 1 /* settle */\nfunction writeBatch () {}\nconst x = { keyGenerator: 1 }\n')
  t.notOk(defines(code, 'settle'), 'a name in a comment only is not defined')
  t.ok(defines(code, 'writeBatch'), 'a function declaration is')
  t.ok(defines(code, 'keyGenerator'), 'a property is')
  t.notOk(defines('if (kind === settle) call(settle)', 'settle'), 'a comparison or a call is not')
  const marks = ruleMarks({ rule: 'a key twice is 400 (`Duplicate key`)', files: '`src/json-body.ts` (refuseDuplicateKeys)' })
  t.ok(marks.some((m) => m.test('t.match(body.message, /duplicate key/)')), 'a test naming the term mentions the rule')
  t.ok(marks.some((m) => m.test('assertErrorShape(t, res, 400)')), 'so does one checking the status')
  t.notOk(marks.some((m) => m.test('t.equal(res.statusCode, 4000); // 1.400 s')), 'a longer number is not the status')
  t.notOk(marks.some((m) => m.test('t.equal(res.statusCode, 200, "stored")')), 'a test of another rule does not')
})
