// What an answer of the API means to a caller, as the OpenAPI document tells it: when it is given, whether sending
// the request again is safe, the headers it carries, and an example.
//
// A route lists the answers it gives itself in its config (`config.answers`). Each plugin that guards routes adds
// the answers it causes to every route it guards, in an onRoute hook: auth its 401, the JSON body its 400 and 415,
// the rate limit its 429. plugins/docs.ts writes each route's list into the document, so the document lists what
// the running service can answer, and nothing else.

export type AnswerHeader = 'Retry-After' | 'WWW-Authenticate'

interface Described {
  when: string
  retry: string
  headers?: readonly AnswerHeader[]
}

// An error answer's example is the Error body with its message; any other answer gives its own example.
export type Answer = Described & ({ message: string } | { example: unknown })

export type Answers = Readonly<Partial<Record<number, Answer>>>

// A route's config with answers added. It is a new object, because routes may share one config object.
export function withAnswers<C extends { answers?: Answers }> (config: C | undefined, added: Answers): C & { answers: Answers } {
  return { ...config, answers: { ...config?.answers, ...added } } as C & { answers: Answers }
}

// What a route that writes to the database can answer besides its own answers. The error handler sends the
// 503 and 504 messages as they are written here.
export const STORE_WRITE_ANSWERS = {
  500: {
    when: 'An unexpected failure; the details are in the service log under the X-Request-Id.',
    retry: 'Nothing was acknowledged. Sending the same request again is safe where the operation is idempotent; ' +
      'report the X-Request-Id if it persists.',
    message: 'Internal Server Error'
  },
  503: {
    when: 'The database is unreachable or too slow, too many writes are waiting for it, the service is overloaded ' +
      '(the body is not read) or shutting down, or the issuer\'s keys cannot be had to check a JWT.',
    retry: 'Nothing was stored. Safe to retry after the Retry-After delay.',
    headers: ['Retry-After'],
    message: 'The database is unavailable; retry later'
  },
  504: {
    when: 'The write was sent to the database and not confirmed in time (a commit waiting for a synchronous standby, ' +
      'a frozen database, a lost reply): the outcome is unknown: the write may or may not be stored.',
    retry: 'Replay the same request after the Retry-After delay: the answer to an idempotent write tells what is ' +
      'stored. Never assume that it was not stored.',
    headers: ['Retry-After'],
    message: 'The database did not confirm the write in time: outcome unknown; replaying this create tells'
  }
} as const satisfies Answers
