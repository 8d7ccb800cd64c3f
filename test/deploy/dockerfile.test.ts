import t from 'tap'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { createServer, type Server } from 'node:http'
import { once } from 'node:events'
import { join } from 'node:path'
import { validate } from 'dockerfile-utils'
import { all, dockerignoreMatcher, execForm, inStage, last, parseDockerfile, splitFlags, stagesOf, type Stage } from '../support/dockerfile.js'
import { freePort, root, spawnProcess, stageRuntime } from '../support/processes.js'

// No Docker engine runs here, so the image is checked by reading the
// Dockerfile and running, outside a container, what the image would run.
const text = readFileSync(join(root, 'Dockerfile'), 'utf8')
const instructions = parseDockerfile(text)
const stages = stagesOf(instructions)
const final = stages.at(-1) as Stage
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  engines: { node: string }, scripts: Record<string, string>, dependencies: Record<string, string>
}
const ignored = dockerignoreMatcher(readFileSync(join(root, '.dockerignore'), 'utf8'))
const runs = (stage: Stage): string[] => all(stage, 'RUN').map((i) => i.args)

t.test('dockerfile-utils finds nothing to report', async (t) => {
  t.same(validate(text).map((d) => `${d.range.start.line + 1}: ${d.message}`), [])
})

t.test('multi-stage: build with dev dependencies, run with production dependencies', async (t) => {
  t.ok(stages.length >= 2, 'at least two stages')
  const build = stages.find((s) => runs(s).some((r) => /\bnpm run build\b/.test(r)))
  t.ok(build?.name, 'a named stage compiles with npm run build')
  t.ok(build !== final, 'the build is not the final stage')
  t.ok(runs(build as Stage).some((r) => /\bnpm ci\b/.test(r) && !/--omit=dev|--production/.test(r)), 'the build stage installs dev dependencies')
  t.notOk(runs(final).some((r) => /\bnpm run build\b|\btsc\b/.test(r)), 'nothing is compiled in the final stage')
  t.notOk(runs(final).some((r) => /\bnpm (ci|install|i)\b/.test(r)), 'nothing is installed in the final stage')

  const copies = all(final, 'COPY').map((ins) => {
    const { flags, rest } = splitFlags(ins.args)
    const parts = rest.split(/\s+/)
    return { ins, from: flags.from, sources: parts.slice(0, -1), dest: parts.at(-1) as string }
  })
  const modules = copies.find((c) => c.sources.some((s) => /\/node_modules\/?$/.test(s)))
  const deps = stages.find((s) => s.name !== undefined && s.name === modules?.from)
  t.ok(deps, 'node_modules comes from a named stage')
  t.ok(deps !== undefined && runs(deps).some((r) => /\bnpm ci\b.*--omit=dev/.test(r)), 'which installs production dependencies only')
  t.notOk(copies.some((c) => c.from === undefined && c.sources.some((s) => s.endsWith('.npmrc'))), '.npmrc never reaches the final stage')
  const dist = copies.find((c) => c.from === build?.name && c.sources.some((s) => /\/dist\/?$/.test(s)))
  t.ok(dist, 'the compiled dist/ comes from the build stage')
  const migrations = copies.find((c) => c.from === undefined && c.sources.includes('migrations'))
  t.ok(migrations, 'migrations/ is copied from the context')
  t.notOk(copies.some((c) => c.from === undefined && c.sources.some((s) => /^(src|test|plugins|routes)\b/.test(s))), 'no TypeScript sources or tests in the final stage')
  // src/store/migrations.ts reads migrations/ beside dist/ (the project root).
  const distDir = inStage(final, (dist as typeof copies[number]).ins, (dist as typeof copies[number]).dest)
  const migrationsDir = inStage(final, (migrations as typeof copies[number]).ins, (migrations as typeof copies[number]).dest)
  t.equal(migrationsDir, join(distDir, '..', 'migrations'), 'migrations/ sits beside dist/')
})

t.test('every base image is the newest supported LTS Node image, pinned by major', async (t) => {
  const names = new Set(stages.map((s) => s.name).filter((n) => n !== undefined))
  // engines.node is one `^MAJOR.MINOR.PATCH` range per supported line; the
  // image runs the newest, the line CI runs the whole suite on.
  const newest = Math.max(...[...pkg.engines.node.matchAll(/\^(\d+)\./g)].map((m) => Number(m[1])))
  for (const stage of stages) {
    if (names.has(stage.image)) continue
    const m = /^node:(\d+)(?:-[a-z0-9.-]+)?(?:@sha256:[0-9a-f]{64})?$/.exec(stage.image)
    t.ok(m, `${stage.image}: node with a major version tag (not latest, lts or untagged)`)
    const major = Number(m?.[1])
    t.equal(major % 2, 0, `${stage.image}: an even major, an LTS line`)
    t.equal(major, newest, `${stage.image}: the newest line engines.node names (${pkg.engines.node})`)
  }
  t.equal(new Set(stages.filter((s) => !names.has(s.image)).map((s) => s.image)).size, 1, 'one Node image for build and run')
})

t.test('the final stage runs node on the compiled entry as a non-root user', async (t) => {
  const user = last(final, 'USER')?.args.trim()
  t.ok(user, 'USER is set in the final stage')
  t.notOk(/^(root|0)(:.*)?$/.test(user ?? 'root'), `USER ${user ?? '(none)'} is not root`)
  t.ok(runs(final).some((r) => new RegExp(`chown ${user ?? '-'}(:\\S+)? \\.data\\b`).test(r)), 'the embedded database directory is the user\'s')
  const userAt = final.instructions.findIndex((i) => i.keyword === 'USER')
  t.notOk(final.instructions.slice(userAt + 1).some((i) => i.keyword === 'USER'), 'no later USER switches back')

  const cmd = last(final, 'CMD')
  const argv = execForm(cmd?.args ?? '')
  t.ok(argv, 'CMD is in exec form: no shell between the engine and node')
  t.same(argv, ['node', 'dist/server.js'], 'CMD runs node itself, not npm')
  t.equal(all(final, 'ENTRYPOINT').length, 0, 'no ENTRYPOINT wraps the command')
  // npm start in the image is rewritten to the compiled entry; in a checkout
  // it runs that entry's TypeScript source.
  const rewrite = runs(final).find((r) => /\bnpm pkg set\b/.test(r)) ?? ''
  t.match(rewrite, /\bscripts\.start="node dist\/server\.js"/, 'npm start in the image runs the same entry')
  t.match(rewrite, /\bscripts\.migrate="node dist\/src\/bin\/migrate\.js"/, 'npm run migrate in the image runs the compiled migrate')
  t.match(pkg.scripts.start ?? '', / server\.ts$/, 'npm start in a checkout runs its source')
  t.match(pkg.scripts.migrate ?? '', /\bsrc\/bin\/migrate\.ts$/, 'and npm run migrate the source of the same migrate')
  t.equal(inStage(final, cmd as never, 'dist/server.js'), join(inStage(final, cmd as never, '.'), 'dist/server.js'))
  const stopSignal = last(final, 'STOPSIGNAL')?.args.trim()
  t.ok(stopSignal === undefined || stopSignal === 'SIGTERM', 'the engine stops it with SIGTERM')

  const env = all(final, 'ENV').map((i) => i.args).join(' ')
  t.match(env, /\bNODE_ENV=production\b/, 'NODE_ENV=production')
  t.match(env, /\bHOST=0\.0\.0\.0\b/, 'listens on every interface of the container')
  const port = /\bPORT=(\d+)/.exec(env)?.[1]
  t.ok(port, 'PORT is set')
  t.equal(last(final, 'EXPOSE')?.args.trim(), port, 'EXPOSE matches PORT')
})

t.test('HEALTHCHECK runs node (no curl in slim images) with bounded timing', async (t) => {
  const hc = last(final, 'HEALTHCHECK')
  t.ok(hc, 'the final stage has a HEALTHCHECK')
  const { flags, rest } = splitFlags(hc?.args ?? '')
  t.ok(rest.startsWith('CMD '), 'HEALTHCHECK CMD')
  t.same(execForm(rest.slice(4)), ['node', 'dist/src/bin/healthcheck.js', 'live'], 'exec form, node on the compiled liveness probe')
  t.match(text, /HEALTHCHECK[^]*\n# .*[Ll]iveness, not readiness|[Ll]iveness, not readiness[^]*HEALTHCHECK/, 'the Dockerfile says why liveness')
  const seconds = (v: string | undefined): number => Number(/^(\d+)s$/.exec(v ?? '')?.[1] ?? NaN)
  t.ok(seconds(flags.timeout) < seconds(flags.interval), 'timeout shorter than interval')
  t.ok(seconds(flags['start-period']) >= 10, 'a start period for the first migration')
})

t.test('.dockerignore keeps dependencies, data, secrets and tests out and the build inputs in', async (t) => {
  const rules = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  t.equal(rules[0], '*', 'an allow-list: everything is out first')
  t.ok(rules.slice(1).every((r) => r.startsWith('!')), 'then only re-inclusions')
  for (const path of ['node_modules', 'node_modules/fastify/package.json', '.git', '.git/HEAD', '.data', '.data/pglite/PG_VERSION', 'test', 'test/helper.ts', 'dist', 'secrets/api_tokens.txt', 'secrets/db_password.txt', '.env', '.env.local', 'notes.txt', 'coverage', '.tap']) {
    t.ok(ignored(path), `${path} is not in the build context`)
  }
  // Every COPY from the context must find its source there.
  for (const stage of stages) {
    for (const ins of all(stage, 'COPY')) {
      const { flags, rest } = splitFlags(ins.args)
      if (flags.from !== undefined) continue
      for (const source of rest.split(/\s+/).slice(0, -1)) {
        t.ok(existsSync(join(root, source)), `COPY ${source}: exists`)
        t.notOk(ignored(source), `COPY ${source}: not excluded by .dockerignore`)
      }
    }
  }
})

t.test('the compiled service imports only production dependencies', async (t) => {
  const runtime = await stageRuntime()
  const files = (dir: string): string[] => readdirSync(dir).flatMap((n) => {
    const p = join(dir, n)
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.js') ? [p] : []
  })
  const bare = new Set<string>()
  for (const file of files(join(runtime, 'dist'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:^|\s)(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s+['"]([^'"]+)['"]/gm)) {
      const spec = (m[1] ?? m[2] ?? m[3]) as string
      if (spec.startsWith('.') || spec.startsWith('node:') || builtinModules.includes(spec)) continue
      bare.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0] as string)
    }
  }
  t.ok(bare.has('fastify'), 'the scan finds imports')
  const missing = [...bare].filter((name) => !(name in pkg.dependencies))
  t.same(missing, [], 'every package dist/ imports is a production dependency')
})

t.test('the health probe asks /health/live or /health/ready and fails on anything but 200', async (t) => {
  const runtime = await stageRuntime()
  const port = await freePort()
  let status = 200
  let hang = false
  const paths: string[] = []
  const server: Server = createServer((req, res) => {
    paths.push(req.url ?? '')
    if (!hang) res.writeHead(status).end()
  })
  server.listen(port, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => { server.closeAllConnections(); server.close() })

  const probe = async (which = 'ready'): Promise<{ code: number | null, ms: number }> => {
    const started = Date.now()
    const { code } = await spawnProcess(t, ['node', 'dist/src/bin/healthcheck.js', which], runtime, { PORT: String(port) }).exited
    return { code, ms: Date.now() - started }
  }
  t.equal((await probe()).code, 0, '200: healthy')
  t.equal((await probe('live')).code, 0, '200: live')
  t.same(paths, ['/health/ready', '/health/live'], '`ready` asks /health/ready, `live` asks /health/live')
  t.equal((await probe('lively')).code, 2, 'anything else is a usage error')
  status = 503
  t.equal((await probe()).code, 1, '503: unhealthy')
  hang = true
  const slow = await probe()
  t.equal(slow.code, 1, 'no answer: unhealthy')
  t.ok(slow.ms < 5000, `gives up by itself (${slow.ms} ms), inside the HEALTHCHECK timeout`)
  server.closeAllConnections()
  server.close()
  await once(server, 'close')
  t.equal((await probe()).code, 1, 'nothing listening: unhealthy')
})
