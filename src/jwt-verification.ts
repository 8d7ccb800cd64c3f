import { hash } from 'node:crypto'
import {
  createLocalJWKSet, decodeJwt, decodeProtectedHeader, errors, jwtVerify,
  type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions, type JWTVerifyResult
} from 'jose'
import { isSecureUrl, type JwtAuthConfig } from './config.js'

// JWT access tokens (RFC 9068, checked as RFC 8725 advises) verified with jose against the issuer's key set,
// kept here: jose's remote set throws once its cache is too old and a refresh fails; the last good set must work.

// Asymmetric only: `none` and HMAC (whose "key" would be the issuer's public key, known to everyone) never.
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519']
// Far above any access token an issuer makes; a bigger one is refused before anything is decoded or fetched.
const MAX_TOKEN_LENGTH = 8192
const COOLDOWN_MS = 30_000
// The longest Retry-After a 503 for the issuer's keys carries (retryAfterSeconds), for the document's bound.
export const ISSUER_RETRY_MAX_SECONDS = COOLDOWN_MS / 1000
const FETCH_TIMEOUT_MS = 5_000
// An issuer's key set is a few KiB with a handful of keys. Past these bounds a fetch fails, the body dropped as it
// streams in: a broken or hostile issuer can neither hold the memory, stall the loop parsing, nor make a kid a long scan.
const MAX_DOCUMENT_BYTES = 256 * 1024
const MAX_KEYS = 100
// A set older than this is refreshed in the background, still used meanwhile.
const MAX_AGE_MS = 10 * 60_000
const REMEMBERED_TOKENS = 10_000

export type Verdict =
  | { kind: 'accepted', caller: string }
  | { kind: 'insufficient-scope', caller: string }
  // `reason` is for the log: which check failed, never the token.
  | { kind: 'refused', expired: boolean, reason: string }
  | { kind: 'unavailable', retryAfterSeconds: number, reason: string }

// No usable key, because the issuer did not answer.
class IssuerUnavailable extends Error {}

// From the issuer's discovery metadata, https URLs only (loopback excepted); the token endpoint is for the document.
interface Discovery { jwksUri: string | undefined, tokenEndpoint: string | undefined }

// Fetched when first needed, refetched for an unknown kid at most once per cooldown (one fetch in flight), each
// fetch (discovery and keys) bounded by the timeout and the size; a failed fetch keeps the last good set.
export class IssuerKeys {
  readonly #config: JwtAuthConfig
  readonly #cooldownMs: number
  #keys: JWTVerifyGetKey | undefined
  #fetchedAt = 0
  #lastAttempt = Number.NEGATIVE_INFINITY
  #lastError: string | undefined
  #inFlight: Promise<void> | undefined
  // Read once, when it first answers.
  #discovery: Discovery | undefined

  constructor (config: JwtAuthConfig) {
    this.#config = config
    this.#cooldownMs = config.jwksCooldownMs ?? COOLDOWN_MS
  }

  // AUTH_TOKEN_URL, else discovery's. Not known yet (the issuer was down at start-up), a fetch is started
  // (at most one a cooldown), so a later load of the document has it.
  tokenUrl (): string | undefined {
    const url = this.#config.tokenUrl ?? this.#discovery?.tokenEndpoint
    if (url === undefined && this.#discovery === undefined) this.refresh().catch(() => {})
    return url
  }

  // Seconds until another fetch may be tried.
  retryAfterSeconds (): number {
    return Math.max(1, Math.ceil((this.#lastAttempt + this.#cooldownMs - Date.now()) / 1000))
  }

  // Fetches unless one was tried within the cooldown; never throws.
  async refresh (): Promise<void> {
    if (this.#inFlight !== undefined) return await this.#inFlight
    if (Date.now() - this.#lastAttempt < this.#cooldownMs) return
    this.#lastAttempt = Date.now()
    this.#inFlight = this.#fetch().then((keys) => {
      this.#keys = keys
      this.#fetchedAt = Date.now()
      this.#lastError = undefined
    }, (err: unknown) => {
      this.#lastError = err instanceof Error ? err.message : String(err)
    }).finally(() => { this.#inFlight = undefined })
    return await this.#inFlight
  }

  // jose's key lookup, over the last good set.
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    if (this.#keys === undefined) await this.refresh()
    else if (Date.now() - this.#fetchedAt > MAX_AGE_MS) this.refresh().catch(() => {})
    const keys = this.#keys
    if (keys === undefined) throw new IssuerUnavailable(`no key set from the issuer: ${this.#lastError ?? 'not fetched yet'}`)
    try {
      return await keys(header, token)
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err
      await this.refresh()
      // The last fetch failed: the kid may be new.
      if (this.#lastError !== undefined) throw new IssuerUnavailable(`kid ${JSON.stringify(header.kid)} unknown and no key set from the issuer: ${this.#lastError}`)
      if (this.#keys === keys) throw err
      return await (this.#keys as JWTVerifyGetKey)(header, token)
    }
  }

  // jose checks the set's shape, so a malformed one fails the fetch.
  async #fetch (): Promise<JWTVerifyGetKey> {
    const signal = AbortSignal.timeout(this.#config.fetchTimeoutMs ?? FETCH_TIMEOUT_MS)
    let jwksUrl = this.#config.jwksUrl
    // #discover takes no metadata without a jwks_uri when the keys need one.
    if (jwksUrl === undefined) jwksUrl = (this.#discovery ?? await this.#discover(signal)).jwksUri as string
    // Read for the document's token URL alone: the keys neither wait for it nor fail with it.
    else if (this.#discovery === undefined && this.#config.tokenUrl === undefined) this.#discover(signal).catch(() => {})
    const set = await fetchJson(jwksUrl, signal)
    if (Array.isArray(set.keys) && set.keys.length > MAX_KEYS) throw new Error(`${jwksUrl} has ${set.keys.length} keys, more than ${MAX_KEYS}`)
    return createLocalJWKSet(set as unknown as JSONWebKeySet)
  }

  async #discover (signal: AbortSignal): Promise<Discovery> {
    const metadata = await fetchJson(`${this.#config.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, signal)
    if (metadata.issuer !== this.#config.issuer) throw new Error(`discovery names issuer ${JSON.stringify(metadata.issuer)}`)
    const secure = (url: unknown): string | undefined => typeof url === 'string' && isSecureUrl(url) ? url : undefined
    const discovery = { jwksUri: secure(metadata.jwks_uri), tokenEndpoint: secure(metadata.token_endpoint) }
    // Not kept, so read again on the next fetch.
    if (this.#config.jwksUrl === undefined && discovery.jwksUri === undefined) throw new Error('discovery gives no https jwks_uri')
    this.#discovery = discovery
    return discovery
  }
}

async function fetchJson (url: string, signal: AbortSignal): Promise<Record<string, unknown>> {
  const res = await fetch(url, { signal, redirect: 'error', headers: { accept: 'application/json' } })
  if (!res.ok) {
    await res.body?.cancel()
    throw new Error(`${url} answered ${res.status}`)
  }
  const body = JSON.parse(await boundedText(res, url)) as unknown
  if (typeof body !== 'object' || body === null) throw new Error(`${url} answered no JSON object`)
  return body as Record<string, unknown>
}

// Given up at the first chunk past MAX_DOCUMENT_BYTES (leaving the loop cancels the stream); a Content-Length
// past it refuses the body before any byte is read.
async function boundedText (res: Response, url: string): Promise<string> {
  const tooBig = new Error(`${url} answered more than ${MAX_DOCUMENT_BYTES / 1024} KiB`)
  if (Number(res.headers.get('content-length')) > MAX_DOCUMENT_BYTES) {
    await res.body?.cancel()
    throw tooBig
  }
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of res.body ?? []) {
    size += chunk.byteLength
    if (size > MAX_DOCUMENT_BYTES) throw tooBig
    chunks.push(chunk)
  }
  return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks))
}

// A token that several keys fit (it names no kid, which RFC 7517 does not require): jose refuses to choose and
// hands the candidates over on its error, to be tried in turn as its documentation shows.
async function withEachKey (err: unknown, token: string, options: JWTVerifyOptions): Promise<JWTVerifyResult> {
  if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err
  for await (const key of err) {
    try {
      return await jwtVerify(token, key, options)
    } catch (failed) {
      if (!(failed instanceof errors.JWSSignatureVerificationFailed)) throw failed
    }
  }
  throw new errors.JWSSignatureVerificationFailed()
}

export class AccessTokens {
  readonly keys: IssuerKeys
  readonly #config: JwtAuthConfig
  // Verified tokens by SHA-256 digest, oldest first.
  readonly #remembered = new Map<string, Extract<Verdict, { caller: string }> & { expiresAt: number }>()

  constructor (config: JwtAuthConfig) {
    this.#config = config
    this.keys = new IssuerKeys(config)
  }

  // The scope a create needs.
  get scope (): string { return this.#config.requiredScope }

  // A remembered token is answered at once, without a signature check.
  verify (token: string): Verdict | Promise<Verdict> {
    const digest = hash('sha256', token, 'base64url')
    const known = this.#remembered.get(digest)
    if (known !== undefined) {
      if (Date.now() < known.expiresAt) return known
      this.#remembered.delete(digest)
      return { kind: 'refused', expired: true, reason: 'exp: the remembered token expired' }
    }
    const malformed = this.#precheck(token)
    if (malformed !== undefined) return { kind: 'refused', expired: false, reason: malformed }
    return this.#verifySigned(token, digest)
  }

  // What can be told without a key: a token that fails here never makes the service fetch the issuer's keys.
  #precheck (token: string): string | undefined {
    if (token.length > MAX_TOKEN_LENGTH) return `longer than ${MAX_TOKEN_LENGTH} characters`
    try {
      const header = decodeProtectedHeader(token)
      if (typeof header.alg !== 'string' || !ALGORITHMS.includes(header.alg)) return `alg ${JSON.stringify(header.alg)} not allowed`
      if (typeof header.typ !== 'string' || !/^(application\/)?at\+jwt$/i.test(header.typ)) return `typ ${JSON.stringify(header.typ)} is not at+jwt`
      const iss = decodeJwt(token).iss
      if (iss !== this.#config.issuer) return `iss ${JSON.stringify(iss)} is not the issuer`
    } catch (err) {
      return `malformed: ${(err as Error).message}`
    }
    return undefined
  }

  async #verifySigned (token: string, digest: string): Promise<Verdict> {
    const { issuer, audience, clockSkewS } = this.#config
    const options = { issuer, audience, algorithms: ALGORITHMS, typ: 'at+jwt', clockTolerance: clockSkewS, requiredClaims: ['exp', 'iat', 'sub', 'client_id'] }
    let payload: JWTPayload
    try {
      ({ payload } = await jwtVerify(token, this.keys.getKey, options).catch(async (err: unknown) => await withEachKey(err, token, options)))
    } catch (err) {
      if (err instanceof IssuerUnavailable) return { kind: 'unavailable', retryAfterSeconds: this.keys.retryAfterSeconds(), reason: err.message }
      return { kind: 'refused', expired: err instanceof errors.JWTExpired, reason: (err as Error).message }
    }
    const verdict = this.#judge(payload)
    if (verdict.kind !== 'accepted' && verdict.kind !== 'insufficient-scope') return verdict
    if (this.#remembered.size >= REMEMBERED_TOKENS) this.#remembered.delete(this.#remembered.keys().next().value as string)
    this.#remembered.set(digest, { ...verdict, expiresAt: ((payload.exp as number) + clockSkewS) * 1000 })
    return verdict
  }

  // The claims jose leaves to the caller: iat not in the future, sub and client_id strings, the scope.
  #judge (payload: JWTPayload): Verdict {
    const { clockSkewS, requiredScope } = this.#config
    if ((payload.iat as number) > Date.now() / 1000 + clockSkewS) return { kind: 'refused', expired: false, reason: 'iat is in the future' }
    const clientId = payload.client_id
    if (typeof payload.sub !== 'string' || payload.sub === '') return { kind: 'refused', expired: false, reason: 'sub is not a string' }
    if (typeof clientId !== 'string' || clientId === '') return { kind: 'refused', expired: false, reason: 'client_id is not a string' }
    const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ') : []
    return { kind: scopes.includes(requiredScope) ? 'accepted' : 'insufficient-scope', caller: clientId }
  }
}
