import t from 'tap'
import { TOKEN } from '../helper.js'
import { parseRawResponse, rawExchange, request } from '../support/http.js'
import { startServerProcess, type SourceServer } from '../support/processes.js'

// The small lies at the edges, over a real socket to a real process: the
// JSON parser's words in the log, media types with empty parameters, and
// HTTP that is malformed in ways Node's parser lets through.

const NAME = 'Monstera deliciosa 5f1e'
const TAG = 'variegated-c7a2'

let server: SourceServer
let port: number
t.before(async () => {
  server = await startServerProcess({})
  port = Number(new URL(server.url).port)
})
t.teardown(async () => { await server.stop() })

let nextId = 70_000
const post = async (body: string, contentType = 'application/json') => await request(`${server.url}/plants`, {
  method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': contentType }, body
})

t.test('no plant name or tag reaches the answer or the log through a malformed body', async (t) => {
  const shapes = [
    `{"id":79,"name":'${NAME}'}`,
    `{"id":79,"name":"${NAME}","tag":"${TAG}",}`,
    `{"id":79,"name":"${NAME}","tag":${TAG}}`,
    `{"id":79,"name":"${NAME}" "tag":"${TAG}"}`,
    `{"id":79,name:"${NAME}"}`,
    `{"id":79,"name":"${NAME}","tag":"${TAG}"} trailing`,
    `{"id":79,"name":"${NAME}\u0007","tag":"${TAG}"}`,
    `{"id":79,"name":"${NAME}","tag":"${TAG}"`,
    `["${NAME}", '${TAG}']`
  ]
  for (const body of shapes) {
    const res = await post(body)
    t.equal(res.status, 400, `400: ${body.slice(0, 40)}`)
    t.match(res.body, /"message":"Body is not valid JSON/, 'a JSON error')
    t.notMatch(res.body, /Monstera|deliciosa|variegated/, 'the message holds no plant data')
  }
  await new Promise((resolve) => setTimeout(resolve, 200))
  const rejected = server.logs.filter((line) => line.msg === 'request rejected')
  t.ok(rejected.length >= shapes.length, `${rejected.length} rejections logged`)
  const leaking = server.logs.filter((line) => /Monstera|deliciosa|variegated/.test(JSON.stringify(line)))
  t.same(leaking, [], 'no log line holds the name or the tag')
})

t.test('application/json with empty parameters is application/json (RFC 9110 5.6.6)', async (t) => {
  for (const type of ['application/json;', 'application/json; charset=utf-8;', 'application/json; ; charset=utf-8', 'application/json;;', 'Application/JSON ;']) {
    const res = await post(JSON.stringify({ id: nextId++, name: 'Fern' }), type)
    t.equal(res.status, 200, `${JSON.stringify(type)}: 200`)
  }
  for (const type of ['text/plain;', 'application/json; charset=latin1;', 'application/json;x']) {
    t.equal((await post(JSON.stringify({ id: nextId++, name: 'Fern' }), type)).status, 415, `${JSON.stringify(type)}: 415`)
  }
})

// A create sent raw; then the same id with another name tells whether it
// was stored (409) or not (200).
async function rawCreate (id: number, lines: string[]): Promise<{ status: number | undefined, stored: boolean }> {
  const body = JSON.stringify({ id, name: 'raw' })
  const head = [...lines, `Authorization: Bearer ${TOKEN}`, 'Content-Type: application/json', `Content-Length: ${body.length}`, 'Connection: close']
  const answer = parseRawResponse((await rawExchange(port, [{ data: `${head.join('\r\n')}\r\n\r\n${body}` }], 5000)).response)
  const replay = await post(JSON.stringify({ id, name: 'another' }))
  return { status: answer?.status, stored: replay.status === 409 }
}

t.test('malformed HTTP is refused, not guessed at: nothing processed', async (t) => {
  const cases: Array<[string, string[], number]> = [
    ['two Host headers', ['POST /plants HTTP/1.1', 'Host: a.example', 'Host: b.example'], 400],
    ['a Host with a space', ['POST /plants HTTP/1.1', 'Host: a b'], 400],
    ['a Host with a path', ['POST /plants HTTP/1.1', 'Host: a.example/plants'], 400],
    ['an HTTP/2.0 request line', ['POST /plants HTTP/2.0', 'Host: localhost'], 505]
  ]
  for (const [what, lines, status] of cases) {
    const { status: got, stored } = await rawCreate(nextId++, lines)
    t.equal(got, status, `${what}: ${status}`)
    t.notOk(stored, `${what}: not stored`)
  }
  const fine: Array<[string, string[]]> = [
    ['HTTP/1.0 without Host', ['POST /plants HTTP/1.0']],
    ['a Host with a port', ['POST /plants HTTP/1.1', 'Host: localhost:3000']],
    ['an IPv6 Host', ['POST /plants HTTP/1.1', 'Host: [::1]:3000']]
  ]
  for (const [what, lines] of fine) {
    const { status, stored } = await rawCreate(nextId++, lines)
    t.equal(status, 200, `${what}: 200`)
    t.ok(stored, `${what}: stored`)
  }
})
