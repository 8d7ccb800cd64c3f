import t from 'tap'
import { listeningStubApp, TOKEN } from '../helper.js'
import { parseRawResponse, rawExchange } from '../support/http.js'

// The token is exactly the bytes after "Bearer" and its run of SP (RFC 9110
// 11.4: 1*SP; a tab is not a separator). Anything else around it (a tab,
// U+00A0 as the Latin-1 byte 0xA0 or as UTF-8 C2 A0) belongs to the token,
// so a valid token with it is not valid. Sent as raw bytes: Node's HTTP
// client refuses some of them.
t.test('the bearer token is compared byte for byte', async (t) => {
  // Answers at the edge, no row read: the app runs over the stub store.
  const { port } = await listeningStubApp(t)

  let id = 4000
  const statusFor = async (authorization: Buffer): Promise<number | undefined> => {
    const body = Buffer.from(JSON.stringify({ id: ++id, name: 'bytes' }))
    const raw = Buffer.concat([
      Buffer.from('POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: '),
      authorization,
      Buffer.from(`\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`),
      body
    ])
    return parseRawResponse((await rawExchange(port, [{ data: raw }], 5000)).response)?.status
  }
  const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1')

  const refused: Array<[string, Buffer]> = [
    ['0xA0 after the token', latin1(`Bearer ${TOKEN}\u00a0`)],
    ['0xA0 before the token', latin1(`Bearer \u00a0${TOKEN}`)],
    ['0xA0 instead of the space', latin1(`Bearer\u00a0${TOKEN}`)],
    ['UTF-8 U+00A0 after the token', Buffer.from(`Bearer ${TOKEN}\u00a0`, 'utf8')],
    ['UTF-8 U+00A0 before the token', Buffer.from(`Bearer \u00a0${TOKEN}`, 'utf8')],
    ['0x85 after the token', latin1(`Bearer ${TOKEN}\u0085`)],
    ['a tab between scheme and token', latin1(`Bearer\t${TOKEN}`)],
    ['a space and a tab between scheme and token', latin1(`Bearer \t ${TOKEN}`)]
  ]
  for (const [what, header] of refused) {
    t.equal(await statusFor(header), 401, `${what}: 401`)
  }

  const accepted: Array<[string, Buffer]> = [
    ['one space', latin1(`Bearer ${TOKEN}`)],
    ['several spaces', latin1(`Bearer   ${TOKEN}`)],
    ['the scheme in lower case', latin1(`bearer ${TOKEN}`)],
    ['trailing spaces (not part of the header value)', latin1(`Bearer ${TOKEN}  `)]
  ]
  for (const [what, header] of accepted) {
    t.equal(await statusFor(header), 200, `${what}: 200`)
  }
})
