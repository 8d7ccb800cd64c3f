// What each answer of POST /plants means to a caller, for the route's response
// schemas and the OpenAPI document (plugins/docs.ts).

export type AnswerHeader = 'Retry-After' | 'WWW-Authenticate'

export interface Answer {
  when: string
  retry: string
  headers?: readonly AnswerHeader[]
  message: string // the example Error body's
  onlyWith?: 'issuer' | 'rate-limit' // answered only with AUTH_ISSUER, or RATE_LIMIT_PER_MINUTE
}

export const createPlantOk = {
  when: 'The plant is stored: newly, or it was already stored with the same name and tag (a replay changes nothing).',
  retry: 'Sending the same plant again is safe and answers 200 again.',
  example: { name: 'Monstera', tag: 'indoor' }
}

export const createPlantErrors = {
  400: {
    when: 'The body is not valid JSON (or not UTF-8, or has a key twice), not an object, or not a valid NewPlant; the message names the field and the rule.',
    retry: 'Nothing was stored. Do not retry unchanged: fix the request.',
    message: 'body/id must be integer'
  },
  401: {
    when: 'No bearer token, or one the service does not accept (an expired JWT says so in WWW-Authenticate\'s error_description).',
    retry: 'Nothing was stored. Retry only with a valid token.',
    headers: ['WWW-Authenticate'],
    message: 'Authorization header missing: send Authorization: Bearer <token>'
  },
  403: {
    when: 'The JWT access token is valid but lacks the scope a create needs.',
    retry: 'Nothing was stored. Retry only with a token that has the scope.',
    headers: ['WWW-Authenticate'],
    message: 'The access token lacks the scope plants:write',
    onlyWith: 'issuer'
  },
  408: {
    when: 'The request did not arrive in time (its headers within 10 s, the whole of it within 30 s); the connection is closed.',
    retry: 'Nothing was stored. Safe to retry, sending the request faster.',
    message: 'Request Timeout'
  },
  409: {
    when: 'A different plant (another name or tag) is already stored under this id; nothing was overwritten.',
    retry: 'Nothing was changed. Retrying answers 409 again: choose another id, or send the stored plant.',
    message: 'A different plant is already stored with id 1'
  },
  413: {
    when: 'The body is larger than the configured limit (1 MiB unless the service is configured otherwise).',
    retry: 'Nothing was stored. Do not retry unchanged.',
    message: 'Request body is too large'
  },
  415: {
    when: 'The Content-Type is not application/json (parameters such as charset=utf-8 are allowed, empty ones too; another charset is not).',
    retry: 'Nothing was stored. Do not retry unchanged: send Content-Type: application/json.',
    message: 'Content-Type must be application/json (none was sent)'
  },
  429: {
    when: 'This caller (a static token\'s name, a JWT\'s client_id) has made as many creates this minute as the service allows (only when the service is configured with a limit; the body is not read).',
    retry: 'Nothing was stored. Safe to retry after the Retry-After delay, when the caller\'s minute is over.',
    headers: ['Retry-After'],
    message: 'Too many creates: this caller may make 600 a minute; retry after the Retry-After delay',
    onlyWith: 'rate-limit'
  },
  500: {
    when: 'An unexpected failure; the details are in the service log under the X-Request-Id.',
    retry: 'Nothing was acknowledged. The same create is safe to retry (it is idempotent); report the X-Request-Id if it persists.',
    message: 'Internal Server Error'
  },
  501: {
    when: 'The body is sent with a Transfer-Encoding other than chunked (gzip, chunked, for example); the body is not read and the connection is closed.',
    retry: 'Nothing was stored. Do not retry unchanged: send the body as it is, or chunked.',
    message: 'Transfer-Encoding gzip, chunked is not implemented: send the body as it is, or chunked'
  },
  503: {
    when: 'The database is unreachable or too slow, too many creates are waiting, the service is overloaded (the body is not read) or shutting down, or the issuer\'s keys cannot be had to check a JWT.',
    retry: 'Nothing was stored. Safe to retry after the Retry-After delay.',
    headers: ['Retry-After'],
    message: 'The database is unavailable; retry later'
  },
  504: {
    when: 'The write was sent to the database and not confirmed in time (a commit waiting for a synchronous standby, a frozen database, a lost reply): the outcome is unknown, the plant may or may not be stored.',
    retry: 'Replay the same create after the Retry-After delay: it tells (200 if the plant is stored, by this request or the replay; 409 if a different plant is). Never assume it was not stored.',
    headers: ['Retry-After'],
    message: 'The database did not confirm the write in time: outcome unknown; replaying this create tells'
  }
} as const satisfies Record<number, Answer>
