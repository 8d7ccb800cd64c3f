import fp from 'fastify-plugin'
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import { HttpError, retryAfter } from '../src/http-error.js'

export interface RateLimitOptions {
  // RATE_LIMIT_PER_MINUTE: creates one caller may make per minute.
  perMinute: number
  // How many callers can hold a window at once: the static tokens' callers
  // and the JWT clients allowed for (AUTH_MAX_CLIENTS).
  callers: number
}

// After auth and the media-type check, so a 401 or 415 counts against nothing;
// in this process's memory (docs/operations.md, "Rate limit").
async function rateLimitPlugin (fastify: FastifyInstance, opts: RateLimitOptions): Promise<void> {
  const noHeaders = { 'x-ratelimit-limit': false, 'x-ratelimit-remaining': false, 'x-ratelimit-reset': false, 'retry-after': false }
  await fastify.register(rateLimit, {
    global: true,
    hook: 'onRequest',
    max: opts.perMinute,
    timeWindow: 60_000,
    // The caller plugins/auth.ts found, so a client keeps its window across
    // token refreshes and the limiter's memory never holds a token.
    keyGenerator: (request) => request.caller ?? '',
    // The store forgets the least recently seen caller when full (5,000 by
    // default): sized so that no configured caller's window is forgotten.
    cache: opts.callers,
    // Retry-After comes with the error (plugins/error-answers.ts).
    addHeaders: noHeaders,
    addHeadersOnExceeding: noHeaders,
    errorResponseBuilder: (_request, { max, ttl }) => {
      const message = `Too many creates: this caller may make ${max} a minute; retry after the Retry-After delay`
      return new HttpError(429, message, retryAfter(Math.max(1, Math.ceil(ttl / 1000))))
    }
  })
}

export default fp(rateLimitPlugin, { name: 'rate-limit', fastify: '5.x', dependencies: ['auth'] })
