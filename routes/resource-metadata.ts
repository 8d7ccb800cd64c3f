import type { FastifyInstance } from 'fastify'
import type { JwtAuthConfig } from '../src/config.js'

// OAuth 2.0 protected resource metadata (RFC 9728), public: which issuer's tokens the API takes, for which audience
// and scope, sent how. Registered only when JWT access tokens are accepted.
export default async function resourceMetadata (fastify: FastifyInstance, opts: { auth: JwtAuthConfig }): Promise<void> {
  const metadata = {
    resource: opts.auth.audience,
    authorization_servers: [opts.auth.issuer],
    scopes_supported: [opts.auth.requiredScope],
    bearer_methods_supported: ['header'],
    resource_name: 'Plant store API'
  }
  fastify.get('/.well-known/oauth-protected-resource', { schema: { hide: true } }, async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300')
    return metadata
  })
}
