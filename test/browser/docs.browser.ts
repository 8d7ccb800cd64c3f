// Swagger UI at /docs in a real browser: Debian's chromium driven by
// playwright-core (never a browser that a tool downloads). Run with
// `npm run test:browser`; `npm test` does not include it, so the plain test
// run needs no browser.
import t from 'tap'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Page } from 'playwright-core'
import { buildTestApp, TOKEN } from '../helper.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const ARTIFACTS = fileURLToPath(new URL('../artifacts/', import.meta.url))
const WAIT_MS = 30_000

const op = '#operations-plants-createPlant'

// The live response Swagger UI shows after "Execute": status and body text.
async function executeAndRead (page: Page, previous: string | undefined): Promise<{ status: string, body: string }> {
  await page.locator(`${op} button.execute`).click()
  const status = page.locator(`${op} .live-responses-table tbody .response-col_status`).first()
  // Browser-side code is written as strings: this file is type-checked for
  // Node, without the DOM library.
  const cell = JSON.stringify(`${op} .live-responses-table tbody .response-col_status`)
  await page.waitForFunction(
    `(() => { const t = document.querySelector(${cell})?.textContent?.trim() ?? ''; return t !== '' && t !== ${JSON.stringify(previous ?? '')} })()`,
    undefined,
    { timeout: WAIT_MS }
  )
  const body = await page.locator(`${op} .live-responses-table tbody .response-col_description pre`).first().textContent()
  return { status: (await status.textContent() ?? '').trim(), body: body ?? '' }
}

// The page from the top (title, Authorize) down to the live response.
async function screenshotThroughResponse (page: Page, path: string): Promise<void> {
  const box = await page.locator(`${op} .live-responses-table`).boundingBox()
  if (box === null) throw new Error('no live response on the page')
  const size = page.viewportSize() ?? { width: 1280, height: 1600 }
  await page.screenshot({ path, fullPage: true, clip: { x: 0, y: 0, width: size.width, height: Math.ceil(box.y + box.height + 24) } })
}

t.test('Swagger UI: authorize, try it out, 200 with the plant; without a token, 401', async (t) => {
  // One backend is enough: the page and the API's answers are the same on
  // both, and the other test files cover PostgreSQL.
  const { app, rows } = await buildTestApp(t, 'pglite')
  const origin = await app.listen({ host: '127.0.0.1', port: 0 })

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
  page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()) })
  page.on('pageerror', (err) => pageErrors.push(err.message))
  page.on('request', (req) => {
    const url = req.url()
    if (!url.startsWith(`${origin}/`) && !url.startsWith('data:')) offOrigin.push(url)
  })
  // Recorded from the first script on, before Swagger UI runs.
  await page.addInitScript({
    content: `window.cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI))`
  })

  const docs = await page.goto(`${origin}/docs`)
  t.equal(docs?.status(), 200, 'GET /docs answers 200')
  t.match(docs?.headers()['content-security-policy'], /default-src 'none'/, 'served under the CSP')

  await page.locator(op).waitFor({ timeout: WAIT_MS })
  t.match(await page.locator(`${op} .opblock-summary`).textContent(), /POST\s*\/plants/, 'POST /plants is listed')
  t.match(await page.locator('.info .title').textContent(), /Plant store/i, 'the UI rendered the document')

  // Authorize with the bearer token.
  await page.locator('.auth-wrapper button.authorize').click()
  await page.locator('.modal-ux input').fill(TOKEN)
  await page.locator('.modal-ux button.authorize').click()
  await page.locator('.modal-ux button.btn-done').click()

  // Try it out: the body is pre-filled with the example plant.
  await page.locator(`${op} .opblock-summary`).click()
  await page.locator(`${op} button.try-out__btn`).click()
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
