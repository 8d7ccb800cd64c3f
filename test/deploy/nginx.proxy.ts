// The shipped reverse proxy (deploy/nginx.conf) in a real nginx, Debian's,
// in front of the service as a real process: `npm run test:proxy` (also run
// by `npm run test:compose`; not part of `npm test`, which needs no nginx).
// The file runs as shipped but for the two lines that need Docker: it
// listens on a loopback port instead of 80, and its upstream is the
// service's loopback address instead of the name `app` Docker's DNS answers.
// Without nginx, and without root to install it, this says why and runs
// nothing.
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { TOKEN } from '../helper.js'
import { parseAnswers, rawExchange } from '../support/http.js'
import { freePort, root, startServerProcess } from '../support/processes.js'

const NGINX = '/usr/sbin/nginx'
const BODY_LIMIT = 1_048_576

// Debian's nginx, installed when missing and this is root; otherwise why not.
function nginxPresent (): string | undefined {
  if (existsSync(NGINX)) return undefined
  if (process.getuid?.() !== 0) return `no ${NGINX}, and installing Debian's nginx-light needs root`
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  const update = spawnSync('apt-get', ['update'], { env, encoding: 'utf8', timeout: 300_000 })
  const install = update.status === 0
    ? spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'nginx-light'], { env, encoding: 'utf8', timeout: 600_000 })
    : update
  return existsSync(NGINX) ? undefined : `apt-get could not install nginx-light: ${(install.stderr ?? '').trim().split('\n').slice(-2).join(' ')}`
}

// deploy/nginx.conf with its two Docker lines pointed at loopback ports; a
// line that is no longer in the file fails the test rather than testing
// another configuration.
function localConf (proxyPort: number, appPort: number): string {
  const shipped = readFileSync(join(root, 'deploy', 'nginx.conf'), 'utf8')
  const swaps: Array<[string, string]> = [
    ['  listen 80;\n', `  listen 127.0.0.1:${proxyPort};\n`],
    ['  set $app_replicas app:3000;\n', `  set $app_replicas 127.0.0.1:${appPort};\n`]
  ]
  let conf = shipped
  for (const [from, to] of swaps) {
    if (shipped.split(from).length !== 2) throw new Error(`deploy/nginx.conf no longer holds ${JSON.stringify(from)} once`)
    conf = conf.replace(from, to)
  }
  return conf
}

// nginx in the foreground on conf, with everything it writes in dir.
async function startNginx (dir: string, conf: string, port: number): Promise<() => Promise<void>> {
  // Run as root, nginx's workers are nobody: they need to reach the temporary files.
  chmodSync(dir, 0o755)
  writeFileSync(join(dir, 'site.conf'), conf)
  writeFileSync(join(dir, 'nginx.conf'), [
    'daemon off;', `pid ${dir}/nginx.pid;`, 'error_log stderr warn;', 'events {}',
    'http {', '  access_log off;', `  client_body_temp_path ${dir}/body;`, `  proxy_temp_path ${dir}/proxy;`,
    `  include ${dir}/site.conf;`, '}', ''
  ].join('\n'))
  mkdirSync(join(dir, 'logs'))
  const child = spawn(NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()))
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`)
    if ((await rawExchange(port, [], 200).catch(() => undefined)) !== undefined) break
    await sleep(50)
  }
  return async () => {
    child.kill('SIGQUIT')
    await exited
  }
}

// An answer's body as JSON; null when it is not (nginx's own pages are HTML).
function jsonOf (text: string | undefined): { error?: unknown, message?: unknown } | null {
  try {
    return JSON.parse(text ?? '') as { error?: unknown, message?: unknown }
  } catch {
    return null
  }
}

const blocker = nginxPresent()
t.test('the proxy answers its own errors in the Error shape, with limits at least the service\'s', { skip: blocker ?? false }, async (t) => {
  const service = await startServerProcess({})
  t.teardown(() => service.stop())
  const appPort = Number(new URL(service.url).port)
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-nginx-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const stopNginx = await startNginx(dir, localConf(port, appPort), port)
  t.teardown(stopNginx)

  const send = async (data: string | Buffer): Promise<Array<{ status: number, headers: Record<string, string>, body: string }>> =>
    parseAnswers((await rawExchange(port, [{ data }], 10_000)).response)
  const head = (lines: string[]): string => [...lines, 'Connection: close', '', ''].join('\r\n')
  const createHead = (extra: string[], length: number | 'chunked'): string => head([
    'POST /plants HTTP/1.1', 'Host: localhost', `Authorization: Bearer ${TOKEN}`, 'Content-Type: application/json',
    length === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`, ...extra
  ])
  const bodyOf = (id: number, bytes: number): string => {
    const start = `{"id":${id},"name":"`
    return start + 'x'.repeat(bytes - start.length - 2) + '"}'
  }

  const created = await send(createHead([], bodyOf(1, 100).length) + bodyOf(1, 100))
  t.same(created.map((a) => a.status), [200], 'a create passes through the proxy')
  const atLimit = await send(createHead([], BODY_LIMIT) + bodyOf(2, BODY_LIMIT))
  t.same(atLimit.map((a) => a.status), [200], 'a body of exactly BODY_LIMIT reaches the service and is stored')
  const jwt = 'e'.repeat(8192)
  const longToken = await send(head(['POST /plants HTTP/1.1', 'Host: localhost', `Authorization: Bearer ${jwt}`, 'Content-Type: application/json', 'Content-Length: 2']) + '{}')
  t.same(longToken.map((a) => [a.status, a.headers['www-authenticate']]), [[401, 'Bearer realm="plant-store", error="invalid_token"']],
    'an 8,192-character token reaches the service, which judges it')

  const own: Array<[string, string | Buffer, number]> = [
    ['a body over BODY_LIMIT', createHead([], BODY_LIMIT + 1) + bodyOf(3, BODY_LIMIT + 1), 413],
    ['a chunked body over BODY_LIMIT', createHead([], 'chunked') + `${(BODY_LIMIT + 1).toString(16)}\r\n${bodyOf(4, BODY_LIMIT + 1)}\r\n0\r\n\r\n`, 413],
    ['a request line of 20 KB', head([`GET /${'a'.repeat(20_000)} HTTP/1.1`, 'Host: localhost']), 414],
    ['a header line of 20 KB', head(['GET /health/live HTTP/1.1', 'Host: localhost', `X-Long: ${'a'.repeat(20_000)}`]), 431],
    ['HTTP/2.0 on an HTTP/1 port', head(['GET /health/live HTTP/2.0', 'Host: localhost']), 505],
    ['Transfer-Encoding gzip', createHead([], 'chunked').replace('chunked', 'gzip') + '2\r\n{}\r\n0\r\n\r\n', 501],
    ['a request line that is not HTTP', 'GARBAGE\r\n\r\n', 400],
    ['HTTP/1.1 without Host', head(['GET /health/live HTTP/1.1']), 400],
    ['the error page asked for by name', head(['GET /.proxy-error HTTP/1.1', 'Host: localhost']), 404]
  ]
  for (const [what, data, status] of own) {
    const [answer, ...more] = await send(data)
    t.equal(answer?.status, status, `${what}: ${status}`)
    t.match(answer?.headers['content-type'], /^application\/json/, `${what}: JSON`)
    const body = jsonOf(answer?.body)
    t.same(Object.keys(body ?? {}).sort(), ['error', 'message'], `${what}: exactly error and message`)
    t.ok(body?.error === status && typeof body.message === 'string' && body.message !== '', `${what}: the status and a message`)
    t.same(more, [], `${what}: one answer`)
  }

  await service.stop()
  const [noReplica] = await send(head(['GET /health/live HTTP/1.1', 'Host: localhost']))
  t.equal(noReplica?.status, 502, 'no replica answering: 502')
  t.match(noReplica?.headers['content-type'], /^application\/json/, 'as JSON')
  t.match(jsonOf(noReplica?.body), { error: 502, message: /No replica/ }, 'in the Error shape')
  t.equal(noReplica?.headers['retry-after'], '1', 'with Retry-After')
})

if (blocker !== undefined) t.comment(`nginx: ${blocker}`)
