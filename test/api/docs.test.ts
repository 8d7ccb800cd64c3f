import t from 'tap'
import { DOCS_SECURITY_HEADERS } from '../../plugins/docs.js'
import { assertErrorShape, buildStubApp, postPlant } from '../helper.js'

// Swagger UI's pages are public and carry security headers; the headers stay
// on the docs and do not leak onto the API. (That the UI still works under
// this CSP is shown in a real browser by test/browser/docs.browser.ts.)

t.test('the docs pages', async (t) => {
  const { app } = await buildStubApp(t)

  t.test('GET /docs serves Swagger UI without a token', async (t) => {
    for (const url of ['/docs', '/docs/']) {
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 200, url)
      t.match(res.headers['content-type'], /^text\/html/)
      t.match(res.body, /swagger-ui-bundle\.js/)
    }
  })

  t.test('the pages, scripts and the document carry the security headers', async (t) => {
    for (const url of ['/docs', '/docs/static/swagger-ui-bundle.js', '/docs/static/swagger-initializer.js', '/docs/static/swagger-ui.css', '/docs/json', '/openapi.json']) {
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 200, url)
      for (const [name, value] of Object.entries(DOCS_SECURITY_HEADERS)) {
        t.equal(res.headers[name], value, `${url}: ${name}`)
      }
    }
  })

  t.test('the CSP allows this origin only, and no inline script or eval', async (t) => {
    const csp = DOCS_SECURITY_HEADERS['content-security-policy'] as string
    t.match(csp, /default-src 'none'/)
    t.match(csp, /script-src 'self'(;|$)/)
    t.match(csp, /connect-src 'self'/)
    t.match(csp, /frame-ancestors 'none'/)
    t.notMatch(csp, /unsafe-inline|unsafe-eval|https:|\*/)
  })

  t.test('the headers do not leak onto the API or the health probes', async (t) => {
    const api = await postPlant(app, '{"id": 1, "name": "Monstera"}')
    t.equal(api.statusCode, 200)
    const live = await app.inject({ method: 'GET', url: '/health/live' })
    t.equal(live.statusCode, 200)
    for (const res of [api, live]) t.equal(res.headers['content-security-policy'], undefined)
  })

  t.test('unknown paths under /docs answer 404 in the Error shape', async (t) => {
    for (const url of ['/docs/unknown', '/docs/static/nope.js', '/docs/static/../../package.json', '/openapi.yaml']) {
      const body = assertErrorShape(t, await app.inject({ method: 'GET', url }), 404)
      t.match(body.message, /not found/i, url)
    }
  })

  t.test('writing to the docs is not a route: 404 in the Error shape', async (t) => {
    assertErrorShape(t, await app.inject({ method: 'POST', url: '/openapi.json', payload: '{}', headers: { 'content-type': 'application/json' } }), 404)
  })
})
