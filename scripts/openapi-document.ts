import type { FastifyInstance } from 'fastify'

// The published contract as a file: 2-space JSON with a trailing newline, keys
// in the generator's order, so the same code always writes the same bytes.
export function formatOpenapi (document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`
}

// The document exactly as GET /openapi.json serves it.
export async function servedOpenapi (app: FastifyInstance): Promise<string> {
  const res = await app.inject({ method: 'GET', url: '/openapi.json' })
  if (res.statusCode !== 200) throw new Error(`GET /openapi.json answered ${res.statusCode}: ${res.body}`)
  return formatOpenapi(JSON.parse(res.body))
}
