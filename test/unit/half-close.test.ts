import t from 'tap'
import http, { type Server } from 'node:http'
import { answerHalfClosedClients } from '../../plugins/connection-rules.js'

// httpAllowHalfOpen is the one field of Node's HTTP server the service sets
// that Node does not document: a Node without it fails at start-up.
t.test('a server with httpAllowHalfOpen lets half-closed clients have their answer', async (t) => {
  const server = http.createServer()
  answerHalfClosedClients(server)
  t.equal((server as Server & { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen, true)
})

t.test('a server without it fails loudly', async (t) => {
  t.throws(() => answerHalfClosedClients({} as Server), /httpAllowHalfOpen/)
})
