import fp from 'fastify-plugin'
import bearerAuth from '@fastify/bearer-auth'
import { hash } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { STORE_WRITE_ANSWERS, withAnswers, type Answer, type Answers } from '../src/documented-answers.js'
import { HttpError } from '../src/http-error.js'
import type { AccessTokens, Verdict } from '../src/jwt-verification.js'

// Bearer auth for the routes of its context (docs/api.md, "Callers and tokens"): @fastify/bearer-auth reads the
// header, this callback decides the token (a static token's digest, else a JWT) and names the caller. Failures
// reach the error handler as HttpErrors carrying their WWW-Authenticate (RFC 6750).

export interface AuthOptions {
  tokens: string[]
  names?: ReadonlyMap<string, string> | undefined
  accessTokens?: AccessTokens | undefined
}

const REALM = 'Bearer realm="plant-store"'
const challenge = (params = ''): Record<string, string> => ({ 'www-authenticate': REALM + params })

const digestOf = (token: string): string => hash('sha256', token)

// A static token's caller: its configured name, else the start of its digest (non-secret, stable across restarts).
export function staticCallerName (token: string, names?: ReadonlyMap<string, string>): string {
  return names?.get(token) ?? `token-${digestOf(token).slice(0, 12)}`
}

// A presented token found by its SHA-256 digest: one hash and one lookup whatever the number of tokens, and nothing
// in the timing depends on how many of a valid token's bytes were guessed (a near miss's digest shares nothing).
export function staticCallers (tokens: string[], names?: ReadonlyMap<string, string>): (candidate: string) => string | undefined {
  const byDigest = new Map(tokens.map((token) => [digestOf(token), staticCallerName(token, names)]))
  return (candidate) => byDigest.get(digestOf(candidate))
}

// The distinct static callers (named tokens may share a name, as the old and the new token of a rotation do).
export function staticCallerNames (tokens: string[], names?: ReadonlyMap<string, string>): ReadonlySet<string> {
  return new Set(tokens.map((token) => staticCallerName(token, names)))
}

// The token exactly as sent: the bytes after the scheme and its SP (RFC 9110 11.4, `auth-scheme [ 1*SP token68 ]`),
// less SP and HTAB at the end (not part of a field value; app.inject keeps them). bearer-auth's key went through
// trim(), which would accept a token with U+00A0 added.
export function bearerToken (authorization: string): string {
  let start = 7
  while (authorization.charCodeAt(start) === 0x20) start++
  let end = authorization.length
  while (end > start && (authorization.charCodeAt(end - 1) === 0x20 || authorization.charCodeAt(end - 1) === 0x09)) end--
  return authorization.slice(start, end)
}

const invalidToken = (): HttpError => new HttpError(401, 'The bearer token is not valid', challenge(', error="invalid_token"'))
const noToken = (message: string): HttpError => new HttpError(401, message, challenge())
const schemeTwice = (): HttpError => new HttpError(401, 'The Authorization header names the Bearer scheme twice: send the ' +
  'token alone after "Bearer " (Swagger UI\'s Authorize wants the token alone, and adds the scheme itself)', challenge(', error="invalid_token"'))

// bearer-auth's own refusals (no header, or not the Bearer scheme followed by a space) as 401s with the challenge.
function refusal (err: Error & { code?: string }): Error {
  if (err instanceof HttpError) return err
  if (err.code === 'FST_BEARER_AUTH_MISSING_AUTHORIZATION_HEADER') return noToken('Authorization header missing: send Authorization: Bearer <token>')
  if (err.code === 'FST_BEARER_AUTH_INVALID_AUTHORIZATION_HEADER') return noToken('Authorization must use the Bearer scheme with a token')
  return err
}

const lacksScope = (scope: string): string => `The access token lacks the scope ${scope}`

// Takes a JWT's verdict: true when the token is accepted, else the error that answers the request, thrown.
function acceptOrRefuse (request: FastifyRequest, verdict: Verdict, scope: string): true {
  if ('caller' in verdict) request.caller = verdict.caller
  switch (verdict.kind) {
    case 'accepted':
      return true
    case 'insufficient-scope':
      throw new HttpError(403, lacksScope(scope), challenge(`, error="insufficient_scope", scope="${scope}"`))
    case 'refused': {
      // Which check failed is for the operator, not the caller.
      request.log.info({ authFailure: verdict.reason }, 'access token refused')
      const description = verdict.expired ? 'The access token expired' : 'The access token is not valid'
      throw new HttpError(401, description, challenge(`, error="invalid_token", error_description="${description}"`))
    }
    case 'unavailable':
      request.log.warn({ authFailure: verdict.reason }, 'no key from the token issuer')
      throw new HttpError(503, 'The token issuer cannot be reached to check the access token; retry after the Retry-After delay',
        { 'retry-after': String(verdict.retryAfterSeconds) })
  }
}

const REFUSED: Answer = {
  when: 'No bearer token, or one the service does not accept (an expired JWT says so in WWW-Authenticate\'s error_description).',
  retry: 'Nothing was stored. Retry only with a valid token.',
  headers: ['WWW-Authenticate'],
  message: 'Authorization header missing: send Authorization: Bearer <token>'
}

// What auth answers on every route it guards: 403 and the issuer's 503 only with JWT access tokens.
function authAnswers (scope: string | undefined): Answers {
  if (scope === undefined) return { 401: REFUSED }
  const lacking: Answer = {
    when: 'The JWT access token is valid but lacks the scope the operation needs.',
    retry: 'Nothing was stored. Retry only with a token that has the scope.',
    headers: ['WWW-Authenticate'],
    message: lacksScope(scope)
  }
  return { 401: REFUSED, 403: lacking, 503: STORE_WRITE_ANSWERS[503] }
}

async function authPlugin (fastify: FastifyInstance, opts: AuthOptions): Promise<void> {
  if (opts.tokens.length === 0) throw new Error('auth: at least one token is required')
  const callerOf = staticCallers(opts.tokens, opts.names)
  const { accessTokens } = opts
  const scope = accessTokens?.scope ?? ''
  const answers = authAnswers(accessTokens?.scope)
  fastify.addHook('onRoute', (route) => { route.config = withAnswers(route.config, answers) })
  await fastify.register(bearerAuth, {
    keys: [],
    // The scheme in any case (RFC 9110 11.1); failures go to the error handler.
    specCompliance: 'rfc6749',
    addHook: false,
    // The error handler logs the refusal at info.
    verifyErrorLogLevel: 'debug',
    auth (key, request) {
      const token = bearerToken(request.headers.authorization as string)
      if (token === '') throw noToken('Authorization must use the Bearer scheme with a token')
      // Anything added to a valid token (U+00A0, a tab) makes another token.
      if (token !== key) throw invalidToken()
      const caller = callerOf(token)
      if (caller !== undefined) {
        request.caller = caller
        return true
      }
      // "Bearer Bearer x": a token pasted with its scheme, as into Swagger UI's Authorize, which adds its own.
      if (/^bearer +/i.test(token)) throw schemeTwice()
      if (accessTokens === undefined) throw invalidToken()
      const verdict = accessTokens.verify(token)
      return verdict instanceof Promise ? verdict.then((v) => acceptOrRefuse(request, v, scope)) : acceptOrRefuse(request, verdict, scope)
    }
  })
  const verify = fastify.verifyBearerAuth as NonNullable<FastifyInstance['verifyBearerAuth']>
  fastify.addHook('onRequest', (request, reply, done) => {
    verify(request, reply, (err) => { done(err === undefined ? undefined : refusal(err)) })
  })
  // Keys fetched ahead of the first JWT; an issuer that is down does not stop start-up (JWTs answer 503 meanwhile).
  if (accessTokens !== undefined) fastify.addHook('onReady', async () => { accessTokens.keys.refresh().catch(() => {}) })
}

export default fp(authPlugin, { name: 'auth', fastify: '5.x', dependencies: ['access-log'] })
