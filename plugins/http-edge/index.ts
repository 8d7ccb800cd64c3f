import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Socket } from 'node:net'
import { addEveryAnswerHeaders, errorHandler, notFoundHandler } from '../error-answers.js'
import { declareAccessLogFields } from '../logging/access-log.js'
import { answerHalfClosedClients, closeIfBodyUnread, refuseWhileClosing, serveOneAtATime } from './connection-rules.js'
import { answerUnmetExpectation, answerUnroutedBeforeBody, continueWhenBodyWanted, refuseConnect, refuseUnknownTransferCoding, requireHostHeader } from './http-rules.js'

// The HTTP edge: what every request meets before a route, in the order it
// meets it (docs/architecture.md, "A request's path"). A hook that answers ends the list.
// The options fixed when the server is made are in server-options.ts.
async function httpEdge (fastify: FastifyInstance): Promise<void> {
  answerHalfClosedClients(fastify.server)
  declareAccessLogFields(fastify)
  fastify.setErrorHandler(errorHandler)
  fastify.setNotFoundHandler(notFoundHandler)
  fastify.addHook('onRequest', serveOneAtATime)
  fastify.addHook('onRequest', addEveryAnswerHeaders)
  fastify.addHook('onRequest', refuseUnknownTransferCoding)
  fastify.addHook('onRequest', requireHostHeader)
  fastify.addHook('onRequest', answerUnroutedBeforeBody(fastify))
  fastify.addHook('onRequest', refuseWhileClosing(fastify))
  fastify.addHook('preParsing', continueWhenBodyWanted)
  fastify.addHook('onSend', closeIfBodyUnread)
  fastify.server.on('connect', (req, socket: Socket) => refuseConnect(fastify.log, req, socket))
  fastify.server.on('checkExpectation', (req, res) => answerUnmetExpectation(fastify.log, req, res))
  // With a listener Node leaves 100 Continue to us: see continueWhenBodyWanted.
  fastify.server.on('checkContinue', (req, res) => fastify.server.emit('request', req, res))
}

export default fp(httpEdge, { name: 'http-edge', fastify: '5.x' })
