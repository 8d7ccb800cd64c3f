import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Socket } from 'node:net'
import { answerUnmetExpectation, closeIfBodyUnread, continueWhenBodyWanted, refuseConnect, refuseUnknownTransferCoding, requireHostHeader, routeFirst } from './edge-checks.js'
import { errorHandler, everyAnswerHeaders, notFoundHandler } from './error-answers.js'
import { inTurn, type OnRequestStep } from './connection.js'
import { answerHalfClosedClients, checkNodeInternals } from './node-internals.js'
import { refuseWhileClosing } from './shutdown.js'
import { declareOutcome } from './access-log.js'

// The connection edge, before any route: what each check does, and why, is
// beside it in this folder; the order a request meets them: README, "A
// request's path". Node's private fields are checked first
// (node-internals.ts); malformed HTTP and errors raised before routing are
// server options (src/app.ts).
async function httpEdge (fastify: FastifyInstance): Promise<void> {
  const internals = await checkNodeInternals()
  if (!internals.ok) {
    fastify.log.warn({ failed: internals.failed },
      'Node HTTP server internals are not as expected: safe mode, a request pipelined behind another is dropped unprocessed and its connection closed')
  }
  answerHalfClosedClients(fastify.server)
  declareOutcome(fastify)
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
