import fp from 'fastify-plugin'
import rateLimit from '@fastify/rate-limit'
import { hash } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpError } from './http-edge/error-answers.js'
import { bearerToken } from './auth.js'

export interface RateLimitOptions {
  // RATE_LIMIT_PER_MINUTE: creates one token may make per minute.
  perMinute: number
}

const WINDOW_MS = 60_000

// The bearer token of a request that passed plugins/auth.ts (the same bytes
// auth compared), as a SHA-256 digest: the limiter's memory never holds a
// token.
export function tokenKey (request: FastifyRequest): string {
  return hash('sha256', bearerToken(request.headers.authorization) ?? '', 'base64url')
}

// Per-token limits on creates, through @fastify/rate-limit: registered in the
// API's context after auth, so only authenticated requests count (an
// unauthenticated flood is answered 401 and counts against nothing), and
// after the route's media-type check, so a 415 does not count either. The
// counters live in this process's memory (a fixed one-minute window per
// token from its first create): each instance limits on its own, and a
// restart resets them. Past the limit: 429 in the Error shape, before the
// body is read, with Retry-After (the seconds until the window ends).
async function rateLimitPlugin (fastify: FastifyInstance, opts: RateLimitOptions): Promise<void> {
  const noHeaders = { 'x-ratelimit-limit': false, 'x-ratelimit-remaining': false, 'x-ratelimit-reset': false, 'retry-after': false }
  await fastify.register(rateLimit, {
    global: true,
    hook: 'onRequest',
    max: opts.perMinute,
    timeWindow: WINDOW_MS,
    keyGenerator: tokenKey,
    // Retry-After comes with the error, through plugins/http-edge/error-answers.ts.
    addHeaders: noHeaders,
    addHeadersOnExceeding: noHeaders,
    errorResponseBuilder: (_request, context) => new HttpError(
      429,
      `Too many creates: this token may make ${context.max} a minute; retry after the Retry-After delay`,
      Math.max(1, Math.ceil(context.ttl / 1000))
    )
  })
}

export default fp(rateLimitPlugin, { name: 'rate-limit', fastify: '5.x', dependencies: ['auth'] })
