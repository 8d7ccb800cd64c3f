import fp from 'fastify-plugin'
import swagger, { type FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import type { AnswerHeader, Answers } from '../src/documented-answers.js'
import { RETRY_AFTER_SECONDS } from '../src/http-error.js'
import { ISSUER_RETRY_MAX_SECONDS } from '../src/jwt-verification.js'
import { RATE_LIMIT_WINDOW_SECONDS } from './rate-limit.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    // What the route answers, for the document: its own answers and those the plugins guarding it add.
    answers?: Answers
  }
}

const DOCS_PREFIX = '/docs'

// Swagger UI 5 needs no inline script and nothing from other origins, so its pages run under a CSP of this origin
// only; "Try it out" calls the API on it (connect-src 'self'). test/browser/docs.browser.ts shows the UI works under it.
const DOCS_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

export const DOCS_SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': DOCS_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin'
}

type Content = Record<string, { schema?: unknown, example?: unknown }>
interface Response { description: string, content?: Content, headers?: Record<string, unknown> }
interface Operation {
  parameters?: unknown[]
  requestBody?: { content?: Content }
  responses?: Record<string, Response>
  'x-answers'?: Answers
}
interface Document {
  paths?: Record<string, Record<string, Operation>>
  components?: { schemas?: Record<string, { examples?: unknown[] }>, securitySchemes?: Record<string, unknown> }
  security?: unknown[]
}

// A caller's X-Request-Id is kept when it matches this (plugins/access-log.ts checks it), else a UUID is made, which
// matches it too.
const REQUEST_ID_PATTERN = '^[A-Za-z0-9._:-]{1,128}$'

// The longest wait the service asks for: a rate-limited caller's fresh minute, an issuer's cooldown, a 503's own.
const MAX_RETRY_AFTER_SECONDS = Math.max(RATE_LIMIT_WINDOW_SECONDS, ISSUER_RETRY_MAX_SECONDS, ...Object.values(RETRY_AFTER_SECONDS))

// The response headers callers can rely on, under components.headers, referenced by each answer that carries them.
const HEADERS: Record<AnswerHeader | 'X-Request-Id', { description: string, schema: Record<string, unknown> }> = {
  'X-Request-Id': {
    description: 'On every answer: the id of this request in the service log. It is yours when you sent an ' +
      'X-Request-Id of 1-128 characters of A-Z a-z 0-9 . _ : - (else a generated UUID). Quote it when reporting a problem.',
    schema: { type: 'string', pattern: REQUEST_ID_PATTERN }
  },
  'Retry-After': {
    description: 'Whole seconds to wait before sending the same request again.',
    schema: { type: 'integer', format: 'int32', minimum: 1, maximum: MAX_RETRY_AFTER_SECONDS }
  },
  'WWW-Authenticate': {
    description: 'The bearer challenge (RFC 6750): `Bearer realm="plant-store"`; with `error="invalid_token"` when a token was ' +
      'sent but is not accepted (for a JWT, `error_description` tells an expired token apart), or `error="insufficient_scope", ' +
      'scope="plants:write"` on a 403 when a JWT lacks the scope.',
    schema: { type: 'string' }
  }
}

// The request headers a caller may send to every operation: an id for the request in the logs, and the trace it
// belongs to. A route schema cannot declare them: it would refuse a request the service serves now.
const REQUEST_HEADERS = [{
  name: 'X-Request-Id',
  in: 'header',
  required: false,
  description: 'Optional: an id of yours for this request, echoed in the X-Request-Id answer header and written on its log lines.',
  schema: { type: 'string', pattern: REQUEST_ID_PATTERN }
}, {
  name: 'traceparent',
  in: 'header',
  required: false,
  description: 'Optional: the W3C Trace Context of your trace. The service continues it: its trace id is on every log line ' +
    'of the request, and spans the service exports join your trace. One that is not valid is ignored.',
  schema: { type: 'string' }
}]

// A route's answers travel to its operation under this extension (swagger copies x- keys of a route's schema),
// where describeOperation reads and removes it.
const ANSWERS = 'x-answers' as const

// What the routes' schemas cannot say, written into every operation: each answer the route gives (config.answers)
// with its description, its headers by reference to components.headers (@fastify/swagger writes a response's
// headers inline) and an example (it drops `examples` beside a $ref: an Error's is the Error body with its message);
// the request body's example, from its schema, for clients that read only the media type (Swagger UI's "Try it
// out", generators); and the request headers every operation reads.
function describeOperation (operation: Operation, schemas: NonNullable<Document['components']>['schemas']): void {
  const answers = operation[ANSWERS] ?? {}
  delete operation[ANSWERS]
  operation.parameters = [...(operation.parameters ?? []), ...REQUEST_HEADERS]
  const body = operation.requestBody?.content?.['application/json']
  const bodySchema = (body?.schema as { $ref?: string } | undefined)?.$ref?.split('/').at(-1)
  if (body !== undefined && bodySchema !== undefined) body.example ??= schemas?.[bodySchema]?.examples?.[0]
  const responses = operation.responses ?? {}
  for (const [status, answer] of Object.entries(answers)) {
    if (answer === undefined) continue
    const schema = responses[status]?.content?.['application/json']?.schema ?? { $ref: '#/components/schemas/Error' }
    const example = 'message' in answer ? { error: Number(status), message: answer.message } : answer.example
    const headers = ['X-Request-Id', ...(answer.headers ?? [])].map((h) => [h, { $ref: `#/components/headers/${h}` }])
    responses[status] = {
      description: `${answer.when} ${answer.retry}`,
      content: { 'application/json': { schema, example } },
      headers: Object.fromEntries(headers)
    }
  }
  operation.responses = responses
}

function describeOperations<T> (openapiObject: T): T {
  const doc = openapiObject as Document
  for (const operations of Object.values(doc.paths ?? {})) {
    for (const operation of Object.values(operations)) describeOperation(operation, doc.components?.schemas)
  }
  return openapiObject
}

// Written into the page as source text, so plain browser code: Swagger UI loads and links /openapi.json, the address
// callers use, not /docs/json. Plugins given replace the default list, so its DownloadUrl is listed again.
declare const SwaggerUIBundle: { plugins: { DownloadUrl: (system: unknown) => object } }
const SWAGGER_UI_PLUGINS = [
  function downloadUrl (system: unknown): object { return SwaggerUIBundle.plugins.DownloadUrl(system) },
  // No named local functions: tsx (esbuild) would wrap them in a __name() helper the browser does not have.
  function openapiJsonLink () {
    const wrapActions = Object.fromEntries(['updateUrl', 'download'].map(function (name) {
      return [name, function (action: (url?: string) => unknown) {
        return function (url?: string) { return action(url === undefined || url === '' ? url : new URL('../openapi.json', url).href) }
      }]
    }))
    return { statePlugins: { spec: { wrapActions } } }
  }
]

// oauth, with JWT access tokens: the issuer's client-credentials flow (the committed openapi.json stays without it).
export interface DocsOptions { oauth?: { scope: string, tokenUrl: () => string | undefined } | undefined }

// Added to the served document once a token URL is known, so Swagger UI's Authorize can fetch a token.
function withClientCredentials (doc: Document, oauth: DocsOptions['oauth']): Document {
  const tokenUrl = oauth?.tokenUrl()
  if (oauth === undefined || tokenUrl === undefined) return doc
  const scope = oauth.scope
  const oauth2 = {
    type: 'oauth2',
    description: 'An access token of the issuer for a client with the scope ' + scope + ' (OAuth 2.0 client credentials): ' +
      'the client id and secret come from the team that runs the issuer. The token is a JWT access token (RFC 9068), ' +
      'checked as RFC 8725 (JWT best current practices) asks: an allow-list of asymmetric algorithms, keys only from ' +
      'the issuer\'s key set, the type at+jwt, and the issuer, audience and lifetime checked.',
    flows: { clientCredentials: { tokenUrl, scopes: { [scope]: 'Add plants to the store' } } }
  }
  return {
    ...doc,
    components: { ...doc.components, securitySchemes: { ...doc.components?.securitySchemes, oauth2 } },
    security: [...(doc.security ?? []), { oauth2: [scope] }]
  }
}

// The document's own parts; the paths come from the routes' schemas.
const DOCUMENT: FastifyDynamicSwaggerOptions['openapi'] = {
  openapi: '3.1.0',
  info: {
    title: 'Plant store API',
    description: 'Adds plants to a store. Every API operation needs a bearer token: send `Authorization: Bearer <token>`. ' +
      'Errors answer with an Error body whose `error` equals the HTTP status.',
    version: '1.0.0'
  },
  // The first, relative to the document's own URL, keeps openapi.json independent of where a service runs;
  // code in Node has no such URL and takes the second, with HOST and PORT.
  servers: [
    { url: '/', description: 'The service serving this document' },
    {
      url: 'http://{host}:{port}',
      description: 'A plant store at a known address (pass it as the base URL of a client)',
      variables: {
        host: { default: '127.0.0.1', description: 'The HOST the service listens on' },
        port: { default: '3000', description: 'The PORT the service listens on' }
      }
    }
  ],
  tags: [{ name: 'plants', description: 'The plants in the store' }],
  components: {
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        description: 'A token is a secret string that lets your service call the plant store. Ask the team that runs ' +
          'the plant store for one; a token you make up is refused (401). A plant store started for development without ' +
          'configured tokens prints a generated token at start-up. Paste the token alone, without "Bearer ".'
      }
    },
    // Named first so the routes' schemas stay before the headers, as in the committed openapi.json.
    schemas: {},
    headers: HEADERS
  },
  // Bearer auth on the whole API: the documented routes are the authenticated ones; docs and health are hidden.
  security: [{ bearerAuth: [] }]
}

// The OpenAPI 3.1.0 document from the routes' TypeBox schemas at /openapi.json, and Swagger UI at /docs.
async function docsPlugin (fastify: FastifyInstance, opts: DocsOptions): Promise<void> {
  // At the root (fastify-plugin), so its onRoute hook sees every route registered after it, whatever their context.
  await fastify.register(swagger, {
    openapi: DOCUMENT,
    transform: ({ schema, url, route }) => ({
      url,
      schema: route.config?.answers === undefined ? schema : { ...schema, [ANSWERS]: route.config.answers } as typeof schema
    }),
    transformObject: (doc) => 'openapiObject' in doc ? describeOperations(doc.openapiObject) : doc.swaggerObject,
    // Components take the schemas' $id, and a `$ref: 'Plant'` inside NewPlant becomes #/components/schemas/Plant.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => typeof json.$id === 'string' ? json.$id : `def-${i}` }
  })

  // Encapsulated: the security headers cover the docs pages, Swagger UI's files and the document, nothing else.
  await fastify.register(async (docs) => {
    docs.addHook('onRequest', async (_request, reply) => {
      reply.headers(DOCS_SECURITY_HEADERS)
      // The token URL's origin joins connect-src, so Swagger UI may ask it for a token.
      const url = opts.oauth?.tokenUrl()
      if (url !== undefined) reply.header('content-security-policy', DOCS_CSP.replace("connect-src 'self'", `connect-src 'self' ${new URL(url).origin}`))
    })
    await docs.register(swaggerUi, {
      routePrefix: DOCS_PREFIX,
      theme: { title: 'Plant store API' },
      uiConfig: {
        plugins: SWAGGER_UI_PLUGINS,
        // The standalone layout's top bar draws its logo with an inline <style>, which the CSP blocks; its
        // only other use, loading another document by URL, is not wanted here.
        layout: 'BaseLayout',
        displayOperationId: true
      }
    })
    docs.get('/openapi.json', { schema: { hide: true } }, async () => withClientCredentials(fastify.swagger() as Document, opts.oauth))
    // A person who opens the service's address lands on the documentation.
    docs.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect(DOCS_PREFIX))
  })
}

export default fp(docsPlugin, { name: 'docs', fastify: '5.x' })
