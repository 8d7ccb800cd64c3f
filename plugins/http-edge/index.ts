import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Socket } from 'node:net'
import { answerUnmetExpectation, closeIfBodyUnread, continueWhenBodyWanted, refuseConnect, refuseUnknownTransferCoding, requireHostHeader, routeFirst } from './edge-checks.js'
import { errorHandler, everyAnswerHeaders, notFoundHandler } from './error-answers.js'
import { inTurn, type OnRequestStep } from './connection.js'
import { answerHalfClosedClients, checkNodeInternals } from './node-internals.js'
import { refuseWhileClosing } from './shutdown.js'

// The connection edge, before any route: pipelined requests are processed
// in turn, every answer carries the request id and nosniff, HTTP/1.1 needs a
// Host, a transfer coding other than chunked is 501 and CONNECT 400, a
// request no route takes is answered before its body is read, an
// unmet Expect is answered in the Error shape and 100 Continue waits until
// the body is wanted, an answer given before the body was read closes the
// connection, requests arriving during shutdown are refused, and every
// error, 404 included, takes the Error shape; a client that half-closes
// after its request still gets its answer. Node's private fields are
// checked first (plugins/http-edge/node-internals.ts). (Malformed HTTP and
// pre-routing errors are server options: src/app.ts.)
async function httpEdge (fastify: FastifyInstance): Promise<void> {
  const internals = await checkNodeInternals()
  if (!internals.ok) {
    fastify.log.warn({ failed: internals.failed },
      'Node HTTP server internals are not as expected: safe mode, a request pipelined behind another is dropped unprocessed and its connection closed')
  }
  answerHalfClosedClients(fastify.server)
  fastify.setErrorHandler(errorHandler)
  fastify.setNotFoundHandler(notFoundHandler)
  const unrouted = routeFirst(fastify)
  const refused = refuseWhileClosing(fastify)
  // One synchronous hook for every check of the edge, in this order: a
  // hook costs a turn of Fastify's hook runner, an async one a promise too.
  // A pipelined request's checks run from a socket event, outside Fastify's
  // hook runner: they catch their own errors, and stop if it has answered.
  const checks: OnRequestStep = (request, reply, done) => {
    if (reply.sent) return
    try {
      reply.headers(everyAnswerHeaders(request.id))
      if (refuseUnknownTransferCoding(request, reply)) return
      requireHostHeader(request)
      // Answered here: the hooks after this one do not run.
      if (unrouted(request, reply) !== undefined || refused(request, reply)) return
    } catch (err) {
      done(err as Error)
      return
    }
    done()
  }
  fastify.addHook('onRequest', (request, reply, done) => inTurn(request, reply, done, checks))
  fastify.server.on('connect', (req, socket: Socket) => refuseConnect(fastify.log, req, socket))
  fastify.server.on('checkExpectation', (req, res) => answerUnmetExpectation(fastify.log, req, res))
  // With a listener Node leaves 100 Continue to us: see continueWhenBodyWanted.
  fastify.server.on('checkContinue', (req, res) => fastify.server.emit('request', req, res))
  fastify.addHook('preParsing', continueWhenBodyWanted)
  fastify.addHook('onSend', closeIfBodyUnread)
}

export default fp(httpEdge, { name: 'http-edge', fastify: '5.x' })
