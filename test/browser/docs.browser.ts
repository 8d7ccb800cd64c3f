// Swagger UI at /docs in a real browser: Debian's chromium driven by
// playwright-core (never a browser that a tool downloads). Run with
// `npm run test:browser`; `npm test` does not include it, so the plain test
// run needs no browser.
import t, { type Test } from 'tap'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Page } from 'playwright-core'
import { buildTestApp, TOKEN } from '../helper.js'
import { startServerProcess } from '../support/processes.js'
import { accessLine, startJwtApp } from '../support/jwt-app.js'
import { startProvider, WRITER } from '../support/token-issuer.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const ARTIFACTS = fileURLToPath(new URL('../artifacts/', import.meta.url))
const WAIT_MS = 30_000

const op = '#operations-plants-createPlant'

// The live response Swagger UI shows after "Execute": status and body text.
async function executeAndRead (page: Page, previous: string | undefined): Promise<{ status: string, body: string }> {
  await page.locator(`${op} button.execute`).click()
  const status = page.locator(`${op} .live-responses-table tbody .response-col_status`).first()
  // Polled from here: a waitForFunction that polls in the page evaluates
  // its predicate with eval, which the page's CSP refuses.
  const deadline = Date.now() + WAIT_MS
  let text = ''
  while (text === '' || text === (previous ?? '')) {
    if (Date.now() > deadline) throw new Error(`no new live response within ${WAIT_MS} ms`)
    await new Promise((resolve) => setTimeout(resolve, 100))
    text = (await status.textContent({ timeout: 1000 }).catch(() => null) ?? '').trim()
  }
  const body = await page.locator(`${op} .live-responses-table tbody .response-col_description pre`).first().textContent()
  return { status: text, body: body ?? '' }
}

// The page from the top (title, Authorize) down to the live response.
async function screenshotThroughResponse (page: Page, path: string): Promise<void> {
  const box = await page.locator(`${op} .live-responses-table`).boundingBox()
  if (box === null) throw new Error('no live response on the page')
  const size = page.viewportSize() ?? { width: 1280, height: 1600 }
  await page.screenshot({ path, fullPage: true, clip: { x: 0, y: 0, width: size.width, height: Math.ceil(box.y + box.height + 24) } })
}

// Debian's chromium on a fresh profile, recording console errors, script
// errors, requests to other origins and CSP violations on the page.
async function openBrowser (t: Pick<Test, 'teardown'>, origin: string) {
  const profile = await mkdtemp(join(tmpdir(), 'plant-store-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'
    ],
    viewport: { width: 1280, height: 1600 }
  })
  t.teardown(async () => {
    await context.close()
    await rm(profile, { recursive: true, force: true })
  })

  const page = context.pages()[0] ?? await context.newPage()
  const consoleErrors: string[] = []
  const pageErrors: string[] = []
  const offOrigin: string[] = []
  const requested: string[] = []
  page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()) })
  page.on('pageerror', (err) => pageErrors.push(err.message))
  page.on('request', (req) => {
    const url = req.url()
    requested.push(url)
    if (!url.startsWith(`${origin}/`) && !url.startsWith('data:')) offOrigin.push(url)
  })
  // Recorded from the first script on, before Swagger UI runs.
  await page.addInitScript({
    content: `window.cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI))`
  })
  return { page, consoleErrors, pageErrors, offOrigin, requested }
}

async function authorize (page: Page, token: string): Promise<void> {
  await page.locator('.auth-wrapper button.authorize').click()
  await page.locator('.modal-ux input').fill(token)
  await page.locator('.modal-ux button.authorize').click()
  await page.locator('.modal-ux button.btn-done').click()
}

async function tryItOut (page: Page): Promise<void> {
  await page.locator(`${op} .opblock-summary`).click()
  await page.locator(`${op} button.try-out__btn`).click()
}

// The words of a shell command line as sh reads them ('…' quoting only,
// which is all the banner uses).
function shellWords (line: string): string[] {
  return [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '')
}

// The request a curl command line makes: -X, -H and -d, and its URL.
function curlRequest (line: string): { url: string, init: RequestInit } {
  const words = shellWords(line.slice(line.indexOf('curl ') + 'curl '.length))
  const headers: Record<string, string> = {}
  let url = ''
  let method = 'GET'
  let body: string | undefined
  for (let i = 0; i < words.length; i++) {
    const word = words[i] as string
    if (word === '-X') method = words[++i] ?? ''
    else if (word === '-H') {
      const header = words[++i] ?? ''
      headers[header.slice(0, header.indexOf(':')).trim()] = header.slice(header.indexOf(':') + 1).trim()
    } else if (word === '-d') body = words[++i]
    else if (/^https?:\/\//.test(word)) url = word
    else throw new Error(`unexpected curl argument ${word}`)
  }
  return { url, init: { method, headers, ...(body === undefined ? {} : { body }) } }
}

t.test('Swagger UI: authorize, try it out, 200 with the plant; without a token, 401', async (t) => {
  // One backend is enough: the page and the API's answers are the same on
  // both, and the other test files cover PostgreSQL.
  const { app, rows } = await buildTestApp(t, 'pglite')
  const origin = await app.listen({ host: '127.0.0.1', port: 0 })

  const { page, consoleErrors, pageErrors, offOrigin } = await openBrowser(t, origin)

  const docs = await page.goto(`${origin}/docs`)
  t.equal(docs?.status(), 200, 'GET /docs answers 200')
  t.match(docs?.headers()['content-security-policy'], /default-src 'none'/, 'served under the CSP')

  await page.locator(op).waitFor({ timeout: WAIT_MS })
  t.match(await page.locator(`${op} .opblock-summary`).textContent(), /POST\s*\/plants/, 'POST /plants is listed')
  t.match(await page.locator('.info .title').textContent(), /Plant store/i, 'the UI rendered the document')

  await authorize(page, TOKEN)
  // Try it out: the body is pre-filled with the example plant.
  await tryItOut(page)
  const prefilled = JSON.parse(await page.locator(`${op} textarea.body-param__text`).inputValue()) as { id: number, name: string, tag: string }
  t.same(prefilled, { id: 1, name: 'Monstera', tag: 'indoor' }, 'the example pre-fills the body')

  const ok = await executeAndRead(page, undefined)
  t.equal(ok.status, '200', 'authorized: 200')
  t.same(JSON.parse(ok.body), { name: 'Monstera', tag: 'indoor' }, 'the page shows the created Plant')
  t.match(await page.locator(`${op} .curl-command`).textContent(), `Authorization: Bearer ${TOKEN}`, 'the request carried the token')
  t.same(await rows(), [{ id: '1', name: 'Monstera', tag: 'indoor' }], 'the plant is stored')

  await mkdir(ARTIFACTS, { recursive: true })
  await screenshotThroughResponse(page, join(ARTIFACTS, 'docs-try-it-out-200.png'))

  // Log out, execute again: no token, so 401 in the Error shape.
  await page.locator('.auth-wrapper button.authorize').click()
  await page.locator('.modal-ux button', { hasText: 'Logout' }).click()
  await page.locator('.modal-ux button.btn-done').click()
  const denied = await executeAndRead(page, ok.status)
  t.equal(denied.status, '401', 'without a token: 401')
  t.match(JSON.parse(denied.body), { error: 401, message: /Authorization header missing/ }, 'the page shows the Error body')
  t.notMatch(await page.locator(`${op} .curl-command`).textContent(), /Authorization:/, 'no token was sent')
  await screenshotThroughResponse(page, join(ARTIFACTS, 'docs-try-it-out-401.png'))

  const violations = await page.evaluate('window.cspViolations') as string[]
  t.same(violations, [], 'no CSP violations')
  t.same(consoleErrors.filter((m) => /Content Security Policy|Refused to/i.test(m)), [], 'no CSP errors in the console')
  t.same(pageErrors, [], 'no script errors')
  t.same(offOrigin, [], 'nothing fetched from another origin')
  // The 401 itself is logged by the browser as a failed resource load.
  t.same(consoleErrors.filter((m) => !/status of 401/.test(m)), [], 'no other console errors')
})

t.test('a newcomer: the start-up banner\'s curl, then the first "Try it out" answers 200', async (t) => {
  // The service as a person starts it: its own process, no token
  // configured, so it generates one and prints the banner.
  const server = await startServerProcess({ env: { API_TOKENS: '' } })
  t.teardown(() => server.stop())
  const deadline = Date.now() + WAIT_MS
  while (!server.text.some((l) => /^\s*Docs:/.test(l)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
  const token = /^\s*Token:\s*(\S+)/.exec(server.text.find((l) => /^\s*Token:/.test(l)) ?? '')?.[1]
  const curl = server.text.find((l) => /^\s*Try:\s+curl /.test(l))
  if (token === undefined || curl === undefined) throw new Error(`no banner: ${server.text.join('\n')}`)

  const { url, init } = curlRequest(curl)
  t.equal(url, `${server.url}/plants`, 'the curl calls this service')
  const first = await fetch(url, init)
  t.equal(first.status, 200, 'the banner\'s curl answers 200')

  const { page, pageErrors, requested } = await openBrowser(t, server.url)
  await page.goto(`${server.url}/docs`)
  await page.locator(op).waitFor({ timeout: WAIT_MS })
  t.equal(await page.title(), 'Plant store API', 'the tab title')
  const link = page.locator('.info a', { hasText: 'openapi.json' }).first()
  t.equal(await link.getAttribute('href'), `${server.url}/openapi.json`, 'the page links /openapi.json')
  t.ok(requested.includes(`${server.url}/openapi.json`), 'the document came from /openapi.json')
  t.notOk(requested.some((u) => u.endsWith('/docs/json')), 'not from /docs/json')

  await authorize(page, token)
  await tryItOut(page)
  const answer = await executeAndRead(page, undefined)
  t.equal(answer.status, '200', 'the first Execute after the banner\'s curl: 200')
  t.same(JSON.parse(answer.body), { name: 'Monstera', tag: 'indoor' })
  await mkdir(ARTIFACTS, { recursive: true })
  await screenshotThroughResponse(page, join(ARTIFACTS, 'docs-first-try-after-banner.png'))
  t.same(pageErrors, [], 'no script errors')
})

t.test('with an issuer: Authorize offers the client-credentials flow, and its token creates a plant', async (t) => {
  const provider = await startProvider(t)
  const app = await startJwtApp(t, 'pglite', { issuer: provider.issuer })
  // Discovery (with the token URL) is read with the keys at start-up.
  await app.create(await provider.token(WRITER))
  const { page, pageErrors } = await openBrowser(t, app.url)
  await page.goto(`${app.url}/docs`)
  await page.locator(op).waitFor({ timeout: WAIT_MS })

  await page.locator('.auth-wrapper button.authorize').click()
  const modal = page.locator('.modal-ux')
  t.match(await modal.textContent(), /oauth2 \(OAuth2, clientCredentials\)/, 'the flow is offered')
  t.match(await modal.textContent(), `${provider.issuer}/token`, 'with the issuer\'s token URL')
  await modal.locator('input[id^="client_id_"]').fill(WRITER.id)
  await modal.locator('input[id^="client_secret_"]').fill(WRITER.secret)
  await modal.locator('label[for$="-checkbox-oauth2"]').first().click()
  await modal.locator('.auth-container', { hasText: 'clientCredentials' }).locator('button.authorize').click()
  await modal.locator('button', { hasText: 'Logout' }).first().waitFor({ timeout: WAIT_MS })
  await modal.locator('button.btn-done').first().click()

  await tryItOut(page)
  const answer = await executeAndRead(page, undefined)
  t.equal(answer.status, '200', `a create with the fetched token: 200 (${answer.body})`)
  t.match(await page.locator(`${op} .curl-command`).textContent(), /Authorization: Bearer ey/, 'sent as a bearer JWT')
  t.match(accessLine(app.logs, 200), { caller: WRITER.id }, 'by the client')
  await mkdir(ARTIFACTS, { recursive: true })
  await screenshotThroughResponse(page, join(ARTIFACTS, 'docs-client-credentials-200.png'))
  t.same(await page.evaluate('window.cspViolations'), [], 'no CSP violations')
  t.same(pageErrors, [], 'no script errors')
})
