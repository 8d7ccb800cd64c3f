// The plant store's client for TypeScript callers: a thin layer over
// openapi-fetch, typed by the types openapi-typescript generates from the
// service's openapi.json (src/generated/openapi.ts; `npm run openapi`).
// What it adds: ids written exactly (bigint or safe integer), every HTTP
// answer resolved as a value, and optional retries of 503/429/504.
import createClient from 'openapi-fetch'
import type { components, paths } from './generated/openapi.js'
import { newPlantJson, type NewPlantInput } from './exact-json.js'
import { retryAfterSeconds } from './retry-after.js'

export type { NewPlantInput, PlantId } from './exact-json.js'
export { idDigits, newPlantJson } from './exact-json.js'
export type { components, paths } from './generated/openapi.js'

export type Plant = components['schemas']['Plant']
// The document's schema is named Error, like JavaScript's global Error, so
// this package exports it under another name.
export type ErrorBody = components['schemas']['Error']

export type CreatePlantResult =
  | { ok: true, status: 200, plant: Plant, requestId: string | undefined }
  | { ok: false, status: number, error: ErrorBody, retryAfter?: number, requestId: string | undefined, outcome?: 'unknown' }

export interface PlantStoreClientOptions {
  // Where the service runs, e.g. http://127.0.0.1:3000 (no trailing path).
  baseUrl: string
  // A bearer token the service accepts (from the team that runs it).
  token: string
  // Replaces globalThis.fetch (a proxy agent, a test double).
  fetch?: (input: Request) => Promise<Response>
  // How many times to send the create again after a 503, 429 or 504
  // (default 0). Safe: a create is idempotent, so a plant stored by an
  // earlier attempt answers 200 (a replay). A 504 left after the retries
  // has `outcome: 'unknown'`: the plant may be stored; replaying tells.
  retries?: number
  // Waits longer than this (from Retry-After) are not made: the answer is
  // returned instead. Default 30 s.
  maxRetryWaitMs?: number
}

export interface PlantStoreClient {
  // Resolves with the answer, whatever its status; rejects only when no
  // HTTP answer came (a network error) or when the id is a number that is
  // not a safe integer (TypeError, before anything is sent).
  createPlant(plant: NewPlantInput): Promise<CreatePlantResult>
}

const RETRYABLE = new Set([429, 503, 504])
// When a 503/429/504 carries no usable Retry-After.
const DEFAULT_RETRY_AFTER_SECONDS = 1
const DEFAULT_MAX_RETRY_WAIT_MS = 30_000

export function createPlantStoreClient (options: PlantStoreClientOptions): PlantStoreClient {
  const client = createClient<paths>({
    baseUrl: options.baseUrl,
    headers: { authorization: `Bearer ${options.token}` },
    ...(options.fetch === undefined ? {} : { fetch: options.fetch })
  })
  const retries = options.retries ?? 0
  const maxWaitMs = options.maxRetryWaitMs ?? DEFAULT_MAX_RETRY_WAIT_MS

  async function send (plant: NewPlantInput, json: string): Promise<CreatePlantResult> {
    const { data, error, response } = await client.POST('/plants', {
      // The generated body type says `id: number`; the serializer writes
      // the exact JSON made from the caller's plant instead.
      body: plant as components['schemas']['NewPlant'],
      bodySerializer: () => json,
      headers: { 'content-type': 'application/json' },
      parseAs: 'text'
    })
    return toResult(response, data ?? error)
  }

  return {
    async createPlant (plant) {
      const json = newPlantJson(plant)
      for (let attempt = 0; ; attempt++) {
        const result = await send(plant, json)
        if (result.ok || !RETRYABLE.has(result.status) || attempt >= retries) return result
        const waitMs = (result.retryAfter ?? DEFAULT_RETRY_AFTER_SECONDS) * 1000
        if (waitMs > maxWaitMs) return result
        await new Promise((resolve) => setTimeout(resolve, waitMs))
      }
    }
  }
}

function toResult (response: Response, body: unknown): CreatePlantResult {
  const requestId = response.headers.get('x-request-id') ?? undefined
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  const parsed = parseJson(text)
  if (response.status === 200 && isPlant(parsed)) return { ok: true, status: 200, plant: parsed, requestId }
  const retryAfter = retryAfterSeconds(response.headers.get('retry-after'))
  return {
    ok: false,
    status: response.status,
    // An answer not in the Error shape (a proxy's page, say) is described
    // in it, with the start of what came.
    error: isErrorBody(parsed) ? parsed : { error: response.status, message: `Unexpected answer: ${text.slice(0, 200)}` },
    ...(retryAfter === undefined ? {} : { retryAfter }),
    requestId,
    // 504: the write was sent and not confirmed; unknown, replay to learn.
    ...(response.status === 504 ? { outcome: 'unknown' as const } : {})
  }
}

function parseJson (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function isPlant (value: unknown): value is Plant {
  const v = value as Partial<Plant> | null
  return typeof v === 'object' && v !== null && typeof v.name === 'string' && (v.tag === undefined || typeof v.tag === 'string')
}

function isErrorBody (value: unknown): value is ErrorBody {
  const v = value as Partial<ErrorBody> | null
  return typeof v === 'object' && v !== null && Number.isInteger(v.error) && typeof v.message === 'string'
}
