import fp from 'fastify-plugin'
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, onRequestAsyncHookHandler } from 'fastify'
import { withAnswers } from '../src/documented-answers.js'
import { HttpError, retryAfter } from '../src/http-error.js'

export interface RateLimitOptions {
  perMinute: number // RATE_LIMIT_PER_MINUTE: creates one caller may make per minute
  configured: ReadonlySet<string> // the static tokens' callers (plugins/auth.ts, staticCallerNames)
  maxClients: number // AUTH_MAX_CLIENTS: the JWT clients whose windows are kept apart
}

// The window a caller's count covers, and so the longest Retry-After of a 429.
export const RATE_LIMIT_WINDOW_SECONDS = 60

// The limit runs after auth and the media-type check, so a 401 or a 415 counts against nothing. Its windows are held
// in memory (docs/operations.md, "Rate limit").
async function rateLimitPlugin (fastify: FastifyInstance, opts: RateLimitOptions): Promise<void> {
  const noHeaders = { 'x-ratelimit-limit': false, 'x-ratelimit-remaining': false, 'x-ratelimit-reset': false, 'retry-after': false }
  await fastify.register(rateLimit, {
    // Not global: the limiter is added below to each route's own hooks.
    global: false,
    max: opts.perMinute,
    timeWindow: RATE_LIMIT_WINDOW_SECONDS * 1000,
    // The caller auth found: a client keeps its window across token refreshes, and the limiter holds no token.
    keyGenerator: (request) => request.caller ?? '',
    // Retry-After comes with the error (plugins/error-answers.ts).
    addHeaders: noHeaders,
    addHeadersOnExceeding: noHeaders,
    errorResponseBuilder: (_request, { ttl }) => new HttpError(429, tooMany(opts.perMinute), retryAfter(Math.max(1, Math.ceil(ttl / 1000))))
  })
  // Two limiters, each forgetting its least recently seen caller when full: one sized for the configured callers,
  // which so never lose their windows, one for JWT clients, which past AUTH_MAX_CLIENTS evict each other, never a
  // configured caller. A JWT whose client_id is a configured caller's name shares that caller's window.
  const configured = fastify.rateLimit({ cache: opts.configured.size })
  const clients = fastify.rateLimit({ cache: opts.maxClients })
  const limit: onRequestAsyncHookHandler = async (request, reply) => {
    await (opts.configured.has(request.caller ?? '') ? configured : clients).call(fastify, request, reply)
  }
  const answers = {
    429: {
      when: 'This caller (a static token\'s name, a JWT\'s client_id) has made as many requests this minute as the ' +
        'service allows; the body is not read.',
      retry: 'Nothing was stored. Safe to retry after the Retry-After delay, when the caller\'s minute is over.',
      headers: ['Retry-After'],
      message: tooMany(opts.perMinute)
    }
  } as const
  // On the route, after its own onRequest (the media-type check), as @fastify/rate-limit places its global hook.
  fastify.addHook('onRoute', (route) => {
    route.onRequest = [route.onRequest ?? []].flat().concat(limit)
    route.config = withAnswers(route.config, answers)
  })
}

const tooMany = (perMinute: number): string => `Too many creates: this caller may make ${perMinute} a minute; retry after the Retry-After delay`

export default fp(rateLimitPlugin, { name: 'rate-limit', fastify: '5.x', dependencies: ['auth'] })
