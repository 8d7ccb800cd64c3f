import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { root } from '../support/processes.js'

// npm 11 runs a dependency's install script only when package.json's
// allowScripts approves it, and otherwise warns on every `npm ci` ("install
// scripts not yet covered by allowScripts"). Each locked package with an
// install script is decided here, so a fresh `npm ci` is quiet and a new one
// is a decision, not noise. The lock holds no resolved URLs, so npm approves
// by name, not by version.

const read = (path: string): unknown => JSON.parse(readFileSync(join(root, path), 'utf8'))
const pkg = read('package.json') as { allowScripts?: Record<string, boolean> }
const lock = read('package-lock.json') as { packages: Record<string, { hasInstallScript?: boolean }> }

t.test('every locked package with an install script is approved or denied in allowScripts', async (t) => {
  const withScripts = Object.entries(lock.packages).filter(([, entry]) => entry.hasInstallScript === true).map(([path]) => path.replace(/^.*node_modules\//, ''))
  t.ok(withScripts.length > 0, `the lock marks install scripts (${withScripts.join(', ')})`)
  t.same(withScripts.filter((name) => pkg.allowScripts?.[name] === undefined), [], 'none left undecided')
})
