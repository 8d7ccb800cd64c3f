import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { answerUnmetExpectation, closeIfBodyUnread, requireHostHeader } from '../src/http/edge.js'
import { errorHandler, notFoundHandler } from '../src/http/errors.js'
import { refuseWhileClosing } from '../src/http/shutdown.js'

// The connection edge, before any route: every answer carries the request
// id, HTTP/1.1 needs a Host, an unmet Expect is answered in the Error shape,
// an answer given before the body was read closes the connection, requests
// arriving during shutdown are refused, and every error, 404 included, takes
// the Error shape. (Malformed HTTP and pre-routing errors are server
// options: src/app.ts.)
async function httpEdge (fastify: FastifyInstance): Promise<void> {
  fastify.setErrorHandler(errorHandler)
  fastify.setNotFoundHandler(notFoundHandler)
  fastify.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
    requireHostHeader(request)
  })
  fastify.server.on('checkExpectation', (req, res) => answerUnmetExpectation(fastify.log, req, res))
  fastify.addHook('onSend', closeIfBodyUnread)
  refuseWhileClosing(fastify)
}

export default fp(httpEdge, { name: 'http-edge', fastify: '5.x' })
