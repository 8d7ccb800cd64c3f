import { createServer } from 'node:http'
import { once } from 'node:events'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { AccessTokens } from '../src/jwt-verification.js'

// A token issuer for the JWT targets: an ES256 key whose JWKS is served on
// loopback, and one long-lived access token for the load (each answer after
// the first takes it from the service's verified-token memory). Also the
// cost of a first, uncached verify, measured here in this process.

const ISSUER = 'https://issuer.bench.invalid'
const AUDIENCE = 'urn:plant-store'
const ALG = 'ES256'

export interface BenchIssuer {
  env: Record<string, string>
  token: string
  // Median µs of one verify of a token not seen before (keys cached).
  firstVerifyMicros(count?: number): Promise<number>
  close(): Promise<void>
}

export async function startBenchIssuer (): Promise<BenchIssuer> {
  const { privateKey, publicKey } = await generateKeyPair(ALG)
  const jwk = { ...await exportJWK(publicKey), kid: 'bench-1', alg: ALG, use: 'sig' }
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ keys: [jwk] }))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const jwksUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}/jwks`
  const sign = async (jti: string): Promise<string> => await new SignJWT({ client_id: 'bench', scope: 'plants:write', jti })
    .setProtectedHeader({ alg: ALG, kid: jwk.kid, typ: 'at+jwt' })
    .setIssuer(ISSUER).setAudience(AUDIENCE).setSubject('bench').setIssuedAt().setExpirationTime('4h')
    .sign(privateKey)
  return {
    env: { AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE, AUTH_JWKS_URL: jwksUrl },
    token: await sign('load'),
    async firstVerifyMicros (count = 500) {
      const verifier = new AccessTokens({ issuer: ISSUER, audience: AUDIENCE, jwksUrl, requiredScope: 'plants:write', clockSkewS: 30, maxClients: 1000 })
      await verifier.keys.refresh()
      const tokens = await Promise.all(Array.from({ length: count + 50 }, async (_, i) => await sign(`first-${i}`)))
      const times: number[] = []
      for (const [i, token] of tokens.entries()) {
        const started = process.hrtime.bigint()
        const verdict = await verifier.verify(token)
        if (i >= 50) times.push(Number(process.hrtime.bigint() - started) / 1000)
        if (verdict.kind !== 'accepted') throw new Error(`bench token refused: ${JSON.stringify(verdict)}`)
      }
      times.sort((a, b) => a - b)
      return times[Math.floor(times.length / 2)] as number
    },
    close: async () => {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    }
  }
}
