import t from 'tap'
import { readFile } from 'node:fs/promises'
import { Validator } from '@seriousme/openapi-schema-validator'
import { buildStubApp } from '../helper.js'
import { formatOpenapi, servedOpenapi } from '../../scripts/openapi-document.js'

const committedPath = new URL('../../openapi.json', import.meta.url)

t.test('the committed openapi.json is valid OpenAPI 3.1', async (t) => {
  const committed = JSON.parse(await readFile(committedPath, 'utf8')) as Record<string, unknown>
  const validator = new Validator()
  const result = await validator.validate(committed)
  t.equal(validator.version, '3.1', 'validated as OpenAPI 3.1')
  t.ok(result.valid, `valid: ${JSON.stringify(result.errors, null, 2)}`)
  t.equal(committed.openapi, '3.1.0')
})

t.test('the validator rejects a broken document, so the check above can fail', async (t) => {
  const committed = JSON.parse(await readFile(committedPath, 'utf8')) as Record<string, unknown>
  const broken = { ...committed, info: { title: 'no version' } }
  t.notOk((await new Validator().validate(broken)).valid)
})

t.test('the served document is the committed openapi.json', async (t) => {
  const { app } = await buildStubApp(t)
  const committed = await readFile(committedPath, 'utf8')

  t.test('GET /openapi.json needs no token and equals the file byte for byte', async (t) => {
    const res = await app.inject({ method: 'GET', url: '/openapi.json' })
    t.equal(res.statusCode, 200)
    t.match(res.headers['content-type'], /^application\/json/)
    t.equal(formatOpenapi(JSON.parse(res.body)), committed,
      'openapi.json is out of date: run `npm run openapi` and review the diff')
  })

  t.test('Swagger UI loads the same document', async (t) => {
    const res = await app.inject({ method: 'GET', url: '/docs/json' })
    t.equal(res.statusCode, 200)
    t.equal(formatOpenapi(JSON.parse(res.body)), await servedOpenapi(app))
  })

  t.test('a token does not change the document', async (t) => {
    const res = await app.inject({ method: 'GET', url: '/openapi.json', headers: { authorization: 'Bearer nonsense' } })
    t.equal(res.statusCode, 200)
    t.equal(formatOpenapi(JSON.parse(res.body)), committed)
  })
})
