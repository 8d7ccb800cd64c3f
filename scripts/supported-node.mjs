// Run first by `npm start`, `npm test`, `npm run dev` and `npm run migrate`: on a Node.js outside package.json's
// engines, stop with one line that names the supported lines, before tsx or any dependency loads (on Node 20 they
// fail later with "Unknown file extension .ts", naming no version). `npm ci` is stopped by engine-strict (.npmrc).
// Plain JavaScript, so that any Node.js can run it. An argument checks that version instead (for the tests).
import { readFileSync } from 'node:fs'

const range = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node
const version = process.argv[2] ?? process.versions.node

// engines.node is one `^MAJOR.MINOR.PATCH` per supported line (test/unit/supported-node.test.ts keeps it so).
function supports (version) {
  const [major, minor, patch] = version.split('.').map(Number)
  return range.split('||').some((part) => {
    const floor = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(part)
    if (floor === null) throw new Error(`package.json engines.node: ${part.trim()} is not ^MAJOR.MINOR.PATCH`)
    const [, M, m, p] = floor.map(Number)
    return major === M && (minor > m || (minor === m && patch >= p))
  })
}

if (!supports(version)) {
  process.stderr.write(`plant-store: Node.js v${version} is not supported; use ${range} (package.json "engines")\n`)
  process.exit(1)
}
