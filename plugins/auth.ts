import fp from 'fastify-plugin'
import { hash } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { HttpError } from './error-answers.js'
import { noteCaller } from './logging/access-log.js'
import type { AccessTokens, Verdict } from '../src/jwt-verification.js'

export interface AuthOptions {
  tokens: string[]
  names?: ReadonlyMap<string, string> | undefined
  accessTokens?: AccessTokens | undefined
}

const REALM = 'Bearer realm="plant-store"'

const digestOf = (token: string): string => hash('sha256', token)

// A static token's caller: its configured name, else the start of its
// digest (non-secret, and stable across restarts).
export function staticCallerName (token: string, names?: ReadonlyMap<string, string>): string {
  return names?.get(token) ?? `token-${digestOf(token).slice(0, 12)}`
}

// Finds a presented token by its SHA-256 digest in a map of the configured
// tokens' digests: one hash and one lookup whatever the number of tokens,
// and nothing in the timing depends on how many of a valid token's bytes
// were guessed (the digest of a near miss shares nothing with the token's).
export function staticCallers (tokens: string[], names?: ReadonlyMap<string, string>): (candidate: string) => string | undefined {
  const byDigest = new Map(tokens.map((token) => [digestOf(token), staticCallerName(token, names)]))
  return (candidate) => byDigest.get(digestOf(candidate))
}

// The distinct static callers (named tokens may share a name, as the old
// and the new token of a rotation do).
export function staticCallerCount (tokens: string[], names?: ReadonlyMap<string, string>): number {
  return new Set(tokens.map((token) => staticCallerName(token, names))).size
}

// The token is exactly the bytes after the scheme (case-insensitive) and its
// run of SP and HTAB (RFC 7235), less SP and HTAB at the end (RFC 9110 5.5;
// app.inject keeps them). Not trim(): with U+00A0 added, a token would pass.
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
function unauthorized (request: FastifyRequest, reply: FastifyReply, token: string): HttpError {
  if (token.length > 0) {
    reply.header('www-authenticate', `${REALM}, error="invalid_token"`)
    return new HttpError(401, 'The bearer token is not valid')
  }
  reply.header('www-authenticate', REALM)
  if (request.headers.authorization === undefined) return new HttpError(401, 'Authorization header missing: send Authorization: Bearer <token>')
  return new HttpError(401, 'Authorization must use the Bearer scheme with a token')
}

// The answer to a JWT's verdict: the caller noted, or the error to answer.
function judged (request: FastifyRequest, reply: FastifyReply, verdict: Verdict, scope: string): HttpError | undefined {
  if ('caller' in verdict) noteCaller(request, verdict.caller)
  switch (verdict.kind) {
    case 'accepted':
      return undefined
    case 'insufficient-scope':
      reply.header('www-authenticate', `${REALM}, error="insufficient_scope", scope="${scope}"`)
      return new HttpError(403, `The access token lacks the scope ${scope}`)
    case 'refused': {
      // Which check failed is for the operator, not the caller.
      request.log.info({ authFailure: verdict.reason }, 'access token refused')
      const description = verdict.expired ? 'The access token expired' : 'The access token is not valid'
      reply.header('www-authenticate', `${REALM}, error="invalid_token", error_description="${description}"`)
      return new HttpError(401, description)
    }
    case 'unavailable':
      request.log.warn({ authFailure: verdict.reason }, 'no key from the token issuer')
      return new HttpError(503, 'The token issuer cannot be reached to check the access token; retry after the Retry-After delay', verdict.retryAfterSeconds)
  }
}

// Guards the routes of its encapsulation context. Not @fastify/bearer-auth:
// it needs a space after the scheme (RFC 7235 allows HTAB), trims with trim(),
// sends no WWW-Authenticate and answers in its own shape.
async function authPlugin (fastify: FastifyInstance, opts: AuthOptions): Promise<void> {
  if (opts.tokens.length === 0) throw new Error('auth: at least one token is required')
  const callerOf = staticCallers(opts.tokens, opts.names)
  const accessTokens = opts.accessTokens
  const scope = accessTokens?.scope ?? ''
  fastify.addHook('onRequest', (request, reply, done) => {
    const token = bearerToken(request.headers.authorization) ?? ''
    const caller = token === '' ? undefined : callerOf(token)
    if (caller !== undefined) {
      noteCaller(request, caller)
      return done()
    }
    if (accessTokens === undefined || token === '') return done(unauthorized(request, reply, token))
    const verdict = accessTokens.verify(token)
    if (!(verdict instanceof Promise)) return done(judged(request, reply, verdict, scope))
    verdict.then((v) => done(judged(request, reply, v, scope)), done)
  })
  // Keys fetched ahead of the first JWT; an issuer that is down does not
  // stop start-up (JWTs answer 503 until keys arrive).
  if (accessTokens !== undefined) fastify.addHook('onReady', async () => { accessTokens.keys.refresh().catch(() => {}) })
}

export default fp(authPlugin, { name: 'auth', fastify: '5.x' })
