import fp from 'fastify-plugin'
import bearerAuth from '@fastify/bearer-auth'
import { timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpError } from '../src/http/errors.js'

export interface AuthOptions {
  tokens: string[]
}

const REALM = 'Bearer realm="plant-store"'

// Compares at a fixed width, with no digest: the candidate's UTF-8 bytes
// are written into a zero-filled buffer as wide as the longest configured
// token (MIN_WIDTH at least), and compared with every configured token
// padded alike, and its byte length with theirs. The same work is done
// whatever the candidate, so neither the length of a configured token (up
// to MIN_WIDTH) nor the position of a first differing byte shows in the
// timing; every token is compared, match or not. A SHA-256 digest per
// request did the same job in about three times as long (bench/RESULTS.md).
const MIN_WIDTH = 256

export function tokenMatcher (tokens: string[]): (candidate: string) => boolean {
  const width = Math.max(MIN_WIDTH, ...tokens.map((token) => Buffer.byteLength(token)))
  const known = tokens.map((token) => {
    const padded = Buffer.alloc(width)
    return { padded, length: padded.write(token) }
  })
  const scratch = Buffer.alloc(width)
  return (candidate) => {
    // A candidate wider than the buffer is cut short by write(); its
    // length then differs from every token's.
    const length = Buffer.byteLength(candidate)
    scratch.write(candidate)
    let found = false
    for (const token of known) found = (timingSafeEqual(token.padded, scratch) && token.length === length) || found
    // Zero again: no presented token stays in memory between requests.
    scratch.fill(0)
    return found
  }
}

// The token is exactly the bytes after the scheme and its run of SP and
// HTAB (RFC 7235). @fastify/bearer-auth trims the token with JavaScript's
// trim(), which also drops U+00A0 and other Unicode spaces, so a valid
// token with one of them added would pass; the comparison uses this
// instead. SP and HTAB around the header value are not part of it (RFC
// 9110 5.5; Node's parser already drops them, app.inject does not).
const bearerScheme = /^[ \t]*bearer[ \t]+/i
const schemeThenTab = /^bearer\t/i

export function bearerToken (authorization: string | undefined): string | undefined {
  const scheme = bearerScheme.exec(authorization ?? '')
  return scheme === null ? undefined : (authorization as string).slice(scheme[0].length).replace(/[ \t]+$/, '')
}

// RFC 6750: a request that sent a bearer token which is wrong gets
// error="invalid_token"; one that sent none gets the bare challenge.
function sentBearerToken (request: FastifyRequest): boolean {
  return (bearerToken(request.headers.authorization) ?? '').length > 0
}

function unauthorized (request: FastifyRequest): HttpError {
  if (sentBearerToken(request)) return new HttpError(401, 'The bearer token is not valid')
  if (request.headers.authorization === undefined) return new HttpError(401, 'Authorization header missing: send Authorization: Bearer <token>')
  return new HttpError(401, 'Authorization must use the Bearer scheme with a token')
}

// Guards every route registered in the same encapsulation context as this
// plugin; docs and health live outside it.
async function authPlugin (fastify: FastifyInstance, opts: AuthOptions): Promise<void> {
  if (opts.tokens.length === 0) throw new Error('auth: at least one token is required')
  const matches = tokenMatcher(opts.tokens)
  await fastify.register(bearerAuth, {
    keys: [],
    // The plugin's trimmed key is ignored: see bearerToken.
    auth: (_key: string, request: FastifyRequest) => matches(bearerToken(request.headers.authorization) ?? ''),
    // The scheme name is case-insensitive (RFC 7235).
    specCompliance: 'rfc6749',
    // We add the hook ourselves to attach WWW-Authenticate, and route the
    // 401 through the one error handler so it has the Error shape.
    addHook: false,
    // A wrong token is a client mistake, not a server error.
    verifyErrorLogLevel: 'debug'
  })
  const verify = fastify.verifyBearerAuth
  if (verify === undefined) throw new Error('auth: @fastify/bearer-auth did not decorate verifyBearerAuth')
  fastify.addHook('onRequest', (request, reply, done) => {
    // @fastify/bearer-auth finds the scheme only when a space follows it;
    // RFC 7235 allows HTAB there too. bearerToken reads the same token bytes
    // from the rewritten header.
    const header = request.headers.authorization
    if (header !== undefined && schemeThenTab.test(header)) request.headers.authorization = `Bearer ${header.slice(6)}`
    verify(request, reply, (err?: Error) => {
      if (err === undefined) return done()
      // Anything but a plain "no" from the token check (a bug) stays a 500.
      if ((err as { statusCode?: number }).statusCode !== 401) return done(err)
      reply.header('www-authenticate', sentBearerToken(request) ? `${REALM}, error="invalid_token"` : REALM)
      done(unauthorized(request))
    })
  })
}

export default fp(authPlugin, { name: 'auth', fastify: '5.x' })
