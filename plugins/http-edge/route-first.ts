import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { notFoundHandler } from '../error-answers.js'

// Routing comes first: a request no route takes is answered in onRequest,
// before authentication and before a byte of its body is read (Fastify's
// own 404 route would read and parse the body first). A path of the API (a
// route that is an operation of the OpenAPI document, such as POST
// /plants) answers 405 with Allow to another method; any other request no
// route takes, 404 (the docs and probes are not an API to call otherwise).
// The answer leaves the body unread, so it closes the connection
// (closeIfBodyUnread).
export function answerUnroutedBeforeBody (fastify: FastifyInstance): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  const methodsByPath = new Map<string, Set<string>>()
  fastify.addHook('onRoute', (route) => {
    const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId
    if (operationId === undefined || /[:*]/.test(route.url)) return
    const methods = methodsByPath.get(route.url) ?? new Set<string>()
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) methods.add(method)
    methodsByPath.set(route.url, methods)
  })
  return function answerUnrouted (request, reply, done) {
    if (!request.is404) return done()
    const allowed = methodsByPath.get(pathOf(request.url))
    notFoundHandler(request, reply, allowed === undefined ? undefined : [...allowed].sort())
  }
}

function pathOf (url: string): string {
  const path = url.split('?')[0] ?? ''
  try {
    return decodeURIComponent(path)
  } catch {
    return path
  }
}
