import http from 'node:http'
import { request } from './http.js'

// A steady create load over real HTTP: `connections` clients, each sending
// its next create as soon as the last one is answered, every create with an
// id of its own. Bounded in count and in time; stop() ends it early.

export interface Answer {
  id: number
  name: string
  tag: string
  // 0: no HTTP answer at all (the connection failed).
  status: number
  // Why there was none (ECONNRESET, ECONNREFUSED, a timeout's message).
  error?: string
  sentAt: number
  doneAt: number
}

export interface CreateLoad {
  readonly answers: Answer[]
  // Resolves once every client has had its last answer.
  stop(): Promise<Answer[]>
}

export interface CreateLoadOptions {
  url: string
  token: string
  connections: number
  // Ids firstId, firstId + 1, … in sending order.
  firstId: number
  maxCreates: number
  maxMs: number
  // The longest one create may take before it counts as unanswered.
  answerTimeoutMs: number
  tag: string
}

export function startCreateLoad (o: CreateLoadOptions): CreateLoad {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections })
  const answers: Answer[] = []
  const until = performance.now() + o.maxMs
  let sent = 0
  const state = { stopped: false }
  const client = async (): Promise<void> => {
    while (!state.stopped && sent < o.maxCreates && performance.now() < until) {
      const id = o.firstId + sent++
      const name = `ha-${o.tag}-${id}`
      const sentAt = performance.now()
      const answer = await request(`${o.url}/plants`, {
        method: 'POST',
        agent,
        timeoutMs: o.answerTimeoutMs,
        headers: { authorization: `Bearer ${o.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id, name, tag: o.tag })
      }).then((a) => ({ status: a.status }), (err: NodeJS.ErrnoException) => ({ status: 0, error: err.code ?? err.message }))
      answers.push({ id, name, tag: o.tag, ...answer, sentAt, doneAt: performance.now() })
    }
  }
  const done = Promise.all(Array.from({ length: o.connections }, client)).finally(() => agent.destroy())
  return {
    answers,
    async stop () {
      state.stopped = true
      await done
      return answers
    }
  }
}

export interface LoadOutcome {
  // By status; an answer that never came by its error too (`0 ECONNRESET`).
  byAnswer: Record<string, number>
  acknowledged: number
  stored: number
  // Creates answered 200 that are not in the table.
  lost: number[]
}

// What a load's creates came to, given the ids of its tag that the table
// holds (each deployment reads them its own way: compose exec, docker exec
// on a swarm node).
export function loadOutcome (answers: Answer[], storedIds: Set<string>): LoadOutcome {
  const byAnswer: Record<string, number> = {}
  for (const a of answers) {
    const key = a.error === undefined ? String(a.status) : `${a.status} ${a.error}`
    byAnswer[key] = (byAnswer[key] ?? 0) + 1
  }
  const acknowledged = answers.filter((a) => a.status === 200).map((a) => a.id)
  return { byAnswer, acknowledged: acknowledged.length, stored: storedIds.size, lost: acknowledged.filter((id) => !storedIds.has(String(id))) }
}

export interface LoadFigures {
  byStatus: Record<string, number>
  // From the fault to the end of the longest pause in 200 answers that ends
  // after it: when writes were acknowledged again.
  firstOkAgainMs: number
  // The same pause's start, from the fault (negative: before it).
  pauseStartMs: number
}

export function loadFigures (answers: Answer[], faultAt: number): LoadFigures {
  const byStatus: Record<string, number> = {}
  for (const a of answers) byStatus[a.status] = (byStatus[a.status] ?? 0) + 1
  const oks = answers.filter((a) => a.status === 200).map((a) => a.doneAt).sort((x, y) => x - y)
  let best = { start: faultAt, end: Infinity, length: -1 }
  let prev = -Infinity
  for (const at of oks) {
    if (at > faultAt) {
      const start = Math.max(prev, faultAt)
      if (at - start > best.length) best = { start, end: at, length: at - start }
    }
    prev = at
  }
  return { byStatus, firstOkAgainMs: best.end - faultAt, pauseStartMs: best.start - faultAt }
}
