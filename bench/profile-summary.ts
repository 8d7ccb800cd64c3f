// Reads a V8 .cpuprofile (node --cpu-prof, or BENCH_PROFILE=1 npm run bench)
// and prints where the time went: self time by area (our code, each
// package, GC, idle) and the functions with the most self and inclusive time.
//   npx tsx bench/profile-summary.ts bench/profiles/<file>.cpuprofile [top] [answers]
// With the number of answers the server gave while profiled (every 200 and
// other answer the bench counted for it), times are printed in µs per answer.
import { readFileSync } from 'node:fs'

interface Node {
  id: number
  callFrame: { functionName: string, url: string, lineNumber: number }
  children?: number[]
}
interface Profile { nodes: Node[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }

const file = process.argv[2]
if (file === undefined) throw new Error('usage: profile-summary.ts FILE.cpuprofile [top]')
const top = Number(process.argv[3] ?? 25)
const answers = process.argv[4] === undefined ? undefined : Number(process.argv[4])
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile

const byId = new Map<number, Node>()
const parent = new Map<number, number>()
for (const node of profile.nodes) {
  byId.set(node.id, node)
  for (const child of node.children ?? []) parent.set(child, node.id)
}

function area (node: Node): string {
  const { url, functionName } = node.callFrame
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)'
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg !== null) return pkg[1] as string
  if (url.startsWith('node:')) return 'node:' + url.slice(5).split('/')[0]
  const own = /\/(dist\/)?((?:src|plugins|routes)\/.*)$/.exec(url)
  return own !== null ? (own[2] as string).replace(/\.js$/, '') : url
}
const label = (node: Node): string => `${node.callFrame.functionName || '(anonymous)'} ${area(node)}:${node.callFrame.lineNumber + 1}`

const selfByArea = new Map<string, number>()
const selfByFn = new Map<string, number>()
const inclusive = new Map<string, number>()
let total = 0
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0
  const node = byId.get(id)
  if (node === undefined) return
  total += dt
  const a = area(node)
  selfByArea.set(a, (selfByArea.get(a) ?? 0) + dt)
  selfByFn.set(label(node), (selfByFn.get(label(node)) ?? 0) + dt)
  const seen = new Set<string>()
  for (let n: Node | undefined = node; n !== undefined; n = byId.get(parent.get(n.id) ?? -1)) {
    const l = label(n)
    if (seen.has(l)) continue
    seen.add(l)
    inclusive.set(l, (inclusive.get(l) ?? 0) + dt)
  }
})

const idle = selfByArea.get('(idle)') ?? 0
const busy = total - idle
const pct = (v: number, of: number): string => `${((100 * v) / of).toFixed(1).padStart(5)}%`
const print = (title: string, map: Map<string, number>, of: number, skip: (k: string) => boolean = () => false): void => {
  console.log(`\n${title}`)
  for (const [key, value] of [...map].filter(([k]) => !skip(k)).sort((a, b) => b[1] - a[1]).slice(0, top)) {
    const amount = answers === undefined ? `${(value / 1000).toFixed(0).padStart(7)} ms` : `${(value / answers).toFixed(2).padStart(7)} µs`
    console.log(`${pct(value, of)}  ${amount}  ${key}`)
  }
}

console.log(`${file}: ${(total / 1e6).toFixed(1)} s sampled, idle ${pct(idle, total)}; percentages below are of busy time (${(busy / 1e6).toFixed(1)} s` +
  `${answers === undefined ? '' : `, ${(busy / answers).toFixed(1)} µs per answer`})`)
print('self time by area', selfByArea, busy, (k) => k === '(idle)')
print('self time by function', selfByFn, busy, (k) => k.startsWith('(idle)'))
print('inclusive time by function', inclusive, busy, (k) => k.startsWith('(idle)') || k.startsWith('(root)'))
