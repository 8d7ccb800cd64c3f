import fp from 'fastify-plugin'
import { timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpError } from './http-edge/error-answers.js'

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
// request did the same job, slower (bench/RESULTS.md).
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
    // length then differs from every token's. write() never writes part of
    // a character, and no character takes more than 4 bytes: with 4 bytes
    // to spare nothing was cut, and what was written is its length.
    const written = scratch.write(candidate)
    const length = written <= width - 4 ? written : Buffer.byteLength(candidate)
    let found = false
    for (const token of known) found = (timingSafeEqual(token.padded, scratch) && token.length === length) || found
    // Zero again: no presented token stays in memory between requests.
    // Only the bytes written can be other than zero; the typed array's own
    // fill, not Buffer's, which checks its arguments and crosses into C++.
    Uint8Array.prototype.fill.call(scratch, 0, 0, written)
    return found
  }
}

// The token is exactly the bytes after the scheme, whose name is
// case-insensitive, and its run of SP and HTAB (RFC 7235). JavaScript's
// trim() would also drop U+00A0 and other Unicode spaces, so a valid token
// with one of them added would pass. SP and HTAB around the header value
// are not part of it (RFC 9110 5.5; Node's parser already drops them,
// app.inject does not).
const bearerScheme = /^[ \t]*bearer[ \t]+/i
const CANONICAL = 'Bearer '

export function bearerToken (authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined
  // What nearly every caller sends, "Bearer " and the token with no space
  // or tab around it, is cut without a regular expression.
  if (authorization.startsWith(CANONICAL) && !isSpaceOrTab(authorization.charCodeAt(CANONICAL.length)) &&
    !isSpaceOrTab(authorization.charCodeAt(authorization.length - 1))) {
    return authorization.slice(CANONICAL.length)
  }
  const scheme = bearerScheme.exec(authorization)
  return scheme === null ? undefined : authorization.slice(scheme[0].length).replace(/[ \t]+$/, '')
}

function isSpaceOrTab (c: number): boolean {
  return c === 0x20 || c === 0x09
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
// plugin; docs and health live outside it. The hook is the project's own:
// @fastify/bearer-auth finds the scheme only when a space follows it (RFC
// 7235 allows HTAB), trims the token with trim(), sends no WWW-Authenticate
// and answers in its own shape, so every part of it was replaced.
async function authPlugin (fastify: FastifyInstance, opts: AuthOptions): Promise<void> {
  if (opts.tokens.length === 0) throw new Error('auth: at least one token is required')
  const matches = tokenMatcher(opts.tokens)
  fastify.addHook('onRequest', (request, reply, done) => {
    if (matches(bearerToken(request.headers.authorization) ?? '')) return done()
    reply.header('www-authenticate', sentBearerToken(request) ? `${REALM}, error="invalid_token"` : REALM)
    // Through the one error handler, so the 401 has the Error shape.
    done(unauthorized(request))
  })
}

export default fp(authPlugin, { name: 'auth', fastify: '5.x' })
