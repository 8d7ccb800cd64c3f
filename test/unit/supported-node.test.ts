import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { root } from '../support/processes.js'

// The supported Node lines are written in five places: engines (what npm
// checks), the client's engines, the README's Node section (what people
// read), the Dockerfile (what production runs) and .ci/run (what is tested).
// They must name the same lines, or one of them is a promise nobody keeps.

const read = (path: string): string => readFileSync(join(root, path), 'utf8')
const pkg = JSON.parse(read('package.json')) as { engines: { node: string }, devDependencies: Record<string, string> }
const client = JSON.parse(read('client/package.json')) as { engines: { node: string } }
const ci = read('.ci/run')
const readme = read('README.md')

// engines.node: one `^MAJOR.MINOR.PATCH` range per line, oldest first.
function lines (range: string): number[] {
  return range.split('||').map((part) => Number(/^\s*\^(\d+)\.\d+\.\d+\s*$/.exec(part)?.[1] ?? NaN))
}
const majorOf = (version: string): number => Number(version.split('.')[0])

const supported = lines(pkg.engines.node)
const newest = /^NODE_NEWEST=(\d+\.\d+\.\d+)$/m.exec(ci)?.[1] ?? ''
const others = (/^NODE_OTHERS=\(([\d. ]+)\)$/m.exec(ci)?.[1] ?? '').trim().split(/\s+/)
const section = /^## Node\.js versions\n([^]*?)\n## /m.exec(readme)?.[1] ?? ''

t.test('engines names whole even (LTS) lines, oldest first, and the client says the same', async (t) => {
  t.ok(supported.length >= 2 && supported.every((major) => Number.isInteger(major) && major % 2 === 0), `${pkg.engines.node}: ^MAJOR.MINOR.PATCH ranges of LTS lines`)
  t.same(supported, [...supported].sort((a, b) => a - b), 'oldest first')
  t.equal(client.engines.node, pkg.engines.node)
})

t.test('.ci/run tests every supported line: the whole suite on the newest, the process tier on the others', async (t) => {
  t.match(newest, /^\d+\.\d+\.\d+$/, 'NODE_NEWEST is an exact release')
  t.ok(others.every((v) => /^\d+\.\d+\.\d+$/.test(v)), 'NODE_OTHERS are exact releases')
  t.equal(majorOf(newest), Math.max(...supported), 'the whole suite runs on the newest line')
  t.same([newest, ...others].map(majorOf).sort((a, b) => a - b), supported, 'one release per supported line, none other')
  t.match(ci, /npx tap test\/process\/\*\.test\.ts/, 'the other lines run the process tier')
})

t.test('the image runs the newest supported line', async (t) => {
  const images = [...read('Dockerfile').matchAll(/^FROM\s+node:(\d+)-/gm)].map((m) => Number(m[1]))
  t.ok(images.length > 0)
  t.same(new Set(images), new Set([Math.max(...supported)]))
})

t.test('the README names each line, the exact release CI tests and the image', async (t) => {
  const rows = [...section.matchAll(/^\| (\d+) \|(.*)\|$/gm)].map((m) => ({ major: Number(m[1]), text: m[2] as string }))
  t.same(rows.map((r) => r.major).sort((a, b) => a - b), supported, 'one row per supported line')
  for (const version of [newest, ...others]) {
    t.ok(rows.some((r) => r.major === majorOf(version) && r.text.includes(version)), `the row for ${majorOf(version)} names ${version}`)
  }
  t.match(section, `\`${pkg.engines.node}\``, 'the section quotes engines')
  t.match(section, `node:${Math.max(...supported)}-bookworm-slim`, 'and the image')
})

t.test('@types/node follows the oldest supported line', async (t) => {
  t.equal(majorOf(pkg.devDependencies['@types/node'] ?? ''), supported[0])
})
