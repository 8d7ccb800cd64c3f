import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'

export const DOCS_PREFIX = '/docs'

// Swagger UI 5 needs no inline script and nothing from other origins, so
// its pages run under a CSP that allows only this origin and no inline
// code; "Try it out" calls the API on the same origin (connect-src 'self').
// test/browser/docs.browser.ts shows the UI works under it.
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'"
].join('; ')

export const DOCS_SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': DOCS_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin'
}

interface MediaType { schema?: { $ref?: string }, example?: unknown }
interface Document {
  paths?: Record<string, Record<string, { requestBody?: { content?: Record<string, MediaType> } }>>
  components?: { schemas?: Record<string, { examples?: unknown[] }> }
}

const COMPONENT_REF = '#/components/schemas/'

// A request body that points at a component with `examples` gets the first
// one as its media-type example: the schema keeps its example in one place,
// and clients that read only the media type (Swagger UI's "Try it out",
// generators) still see it. @fastify/swagger drops keywords beside a $ref,
// so the route cannot say it there.
export function addBodyExamples<T> (openapiObject: T): T {
  const doc = openapiObject as Document
  for (const operations of Object.values(doc.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      for (const media of Object.values(operation.requestBody?.content ?? {})) {
        const ref = media.schema?.$ref
        if (media.example !== undefined || ref?.startsWith(COMPONENT_REF) !== true) continue
        const example = doc.components?.schemas?.[ref.slice(COMPONENT_REF.length)]?.examples?.[0]
        if (example !== undefined) media.example = example
      }
    }
  }
  return openapiObject
}

async function securityHeaders (_request: FastifyRequest, reply: FastifyReply): Promise<void> {
  reply.headers(DOCS_SECURITY_HEADERS)
}

// Public API documentation: the OpenAPI 3.1.0 document generated from the
// routes' TypeBox schemas, served at /openapi.json, and Swagger UI at /docs.
async function docsPlugin (fastify: FastifyInstance): Promise<void> {
  // At the root (fastify-plugin), so its onRoute hook sees every route
  // registered after it, whatever their context.
  await fastify.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Plant store',
        description: 'Adds plants to a store. Every API operation needs a bearer token: ' +
          'send `Authorization: Bearer <token>`. Errors answer with an Error body whose ' +
          '`error` equals the HTTP status.',
        version: '1.0.0'
      },
      tags: [{ name: 'plants', description: 'The plants in the store' }],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'A token configured in API_TOKENS or API_TOKENS_FILE' }
        }
      },
      // The specification applies bearer auth to the whole API. Documented
      // routes are exactly the authenticated ones; the public endpoints
      // (docs, health) are hidden from the document.
      security: [{ bearerAuth: [] }]
    },
    transformObject: (doc) => 'openapiObject' in doc ? addBodyExamples(doc.openapiObject) : doc.swaggerObject,
    // Components take the schemas' $id (Plant, NewPlant, Error), and a
    // `$ref: 'Plant'` inside NewPlant becomes #/components/schemas/Plant.
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => typeof json.$id === 'string' ? json.$id : `def-${i}`
    }
  })

  // Encapsulated, so the security headers cover the docs pages, Swagger
  // UI's static files and the document, and nothing else.
  await fastify.register(async (docs) => {
    docs.addHook('onRequest', securityHeaders)
    await docs.register(swaggerUi, {
      routePrefix: DOCS_PREFIX,
      // No badge that sends the document to validator.swagger.io.
      validatorUrl: false,
      uiConfig: {
        // The standalone layout's top bar draws Swagger's logo as an SVG
        // with an inline <style>, which the CSP blocks; the base layout
        // has no top bar (its only other use, loading another document by
        // URL, is not wanted here).
        layout: 'BaseLayout',
        persistAuthorization: false,
        tryItOutEnabled: false,
        displayOperationId: true
      }
    })
    docs.get('/openapi.json', { schema: { hide: true } }, async () => fastify.swagger())
  })
}

export default fp(docsPlugin, { name: 'docs', fastify: '5.x' })
