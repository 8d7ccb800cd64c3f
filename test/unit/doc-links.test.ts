import t from 'tap'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { root } from '../support/processes.js'

// Every relative link in the docs points at something: a file or folder of
// the repository and, after `#`, a heading of that page. A move or a renamed
// heading that forgets a link fails here. No link leaves the repository.

const docs = ['README.md', 'SECURITY.md', ...['docs', 'bench'].flatMap((dir) =>
  readdirSync(join(root, dir)).filter((f) => f.endsWith('.md')).map((f) => `${dir}/${f}`))]

// Markdown link targets outside fenced code blocks.
function linksOf (text: string): string[] {
  const prose = text.replace(/^ *```[^]*?^ *```$/gm, '')
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1] as string)
}

// The anchors a page's headings get, as the repository host renders them:
// lower case, punctuation dropped, spaces as hyphens, repeats numbered.
function anchorsOf (text: string): Set<string> {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const [, heading] of text.replace(/^ *```[^]*?^ *```$/gm, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const slug = (heading as string).toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-')
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    anchors.add(n === 0 ? slug : `${slug}-${n}`)
  }
  return anchors
}

// What is wrong with the links of `text`, the page at `path` (from the root).
function brokenLinks (path: string, text: string): string[] {
  const problems: string[] = []
  for (const link of linksOf(text)) {
    if (/^[a-z][a-z\d+.-]*:/i.test(link)) {
      problems.push(`${link}: leaves the repository`)
      continue
    }
    const [file = '', anchor] = link.split('#')
    const target = file === '' ? path : normalize(join(dirname(path), file))
    if (file !== '' && (target.startsWith('..') || !existsSync(join(root, target)))) {
      problems.push(`${link}: no ${target}`)
      continue
    }
    if (anchor === undefined) continue
    const page = target === path ? text : readFileSync(join(root, target), 'utf8')
    if (!target.endsWith('.md') || !anchorsOf(page).has(anchor)) problems.push(`${link}: no heading #${anchor} in ${target}`)
  }
  return problems
}

t.test('every relative link in the docs resolves, anchors included', async (t) => {
  t.ok(docs.includes('docs/architecture.md') && docs.includes('bench/RESULTS.md'), docs.join(', '))
  for (const path of docs) {
    const text = readFileSync(join(root, path), 'utf8')
    t.ok(linksOf(text).length > 0, `${path} has links`)
    t.same(brokenLinks(path, text), [], path)
  }
})

t.test('the check can fail: a missing file, a missing heading, an outside link', async (t) => {
  const page = '# Title\n\n## Callers and tokens\n\n[a](nowhere.md) [b](api.md#no-such-heading) [c](api.md) ' +
    '[d](#callers-and-tokens) [e](#title-1) [f](https://example.invalid/) [g](../../outside.md)\n' +
    '```\n[h](in-a-code-block.md)\n```\n'
  t.same(brokenLinks('docs/page.md', page), [
    'nowhere.md: no docs/nowhere.md',
    'api.md#no-such-heading: no heading #no-such-heading in docs/api.md',
    '#title-1: no heading #title-1 in docs/page.md',
    'https://example.invalid/: leaves the repository',
    '../../outside.md: no ../outside.md'
  ])
  t.same([...anchorsOf('## Metrics (`METRICS_PORT`)\n## A request\'s path\n## Twice\n## Twice\n')],
    ['metrics-metrics_port', 'a-requests-path', 'twice', 'twice-1'])
})
