import t from 'tap'
import { API_ROUTES } from '../../app.js'
import { jsonHeaders, listeningStubApp } from '../helper.js'
import { request } from '../support/http.js'
import plantNamesRoute from '../support/plant-names-route.js'

// A route is one file: an operation added from one route file and one line in the API's route list, over real
// HTTP, gets the service's rules (auth, media type, routing, validation) and its answers in the served document.

type Json = Record<string, any>

t.test('a second operation from one route file and its register line', async (t) => {
  const { port } = await listeningStubApp(t, { apiRoutes: [...API_ROUTES, plantNamesRoute] })
  const url = `http://127.0.0.1:${port}`
  const post = async (body: string, headers: Record<string, string> = jsonHeaders()) =>
    await request(`${url}/plant-names`, { method: 'POST', headers, body })
  const status = async (answer: Promise<{ status: number }>): Promise<number> => (await answer).status

  t.equal(await status(post('{"name":"Ficus"}', { 'content-type': 'application/json' })), 401, 'no token: 401')
  t.equal(await status(post('{"name":"Ficus"}', { ...jsonHeaders(), 'content-type': 'text/plain' })), 415, 'text/plain: 415')
  const wrongMethod = await request(`${url}/plant-names`, { method: 'GET', headers: jsonHeaders() })
  t.equal(wrongMethod.status, 405, 'GET: 405')
  t.equal(wrongMethod.headers.allow, 'POST', 'with Allow: POST')
  t.equal(await status(post('{"name":""}')), 400, 'a body its schema refuses: 400')
  t.equal(await status(post('{"name":')), 400, 'malformed JSON: 400')
  const ok = await post('{"name":"Ficus"}')
  t.equal(ok.status, 200, 'a valid body: 200')
  t.same(JSON.parse(ok.body), { name: 'Ficus', letters: 5 })

  const doc = JSON.parse((await request(`${url}/openapi.json`)).body) as Json
  const operation = doc.paths['/plant-names']?.post as Json
  t.equal(operation.operationId, 'checkPlantName')
  t.same(Object.keys(operation.responses), ['200', '400', '401', '408', '413', '415', '501'], 'its answers and its guards\', no 405')
  t.same(operation.responses['200'].content['application/json'].example, { name: 'Monstera', letters: 8 }, 'its own example')
  t.match(operation.responses['200'].description, /letters are counted/)
  t.same(operation.responses['415'].content['application/json'].example.error, 415, 'the body plugin\'s answers, with examples')
  t.same(Object.keys(operation.responses['401'].headers), ['X-Request-Id', 'WWW-Authenticate'], 'auth\'s answer with its header')
  t.same(operation.requestBody.content['application/json'].example, { name: 'Monstera' }, 'the body\'s example from its schema')
  t.same(Object.keys(doc.paths['/plants'].post.responses).length, 11, 'the plants operation keeps its own list')
})
