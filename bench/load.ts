import autocannon from 'autocannon'

export interface LoadResult {
  responses: number
  ok: number
  statusCounts: Record<string, number>
  errors: number
  timeouts: number
  seconds: number
  reqPerSec: number
  p50: number
  p99: number
}

export interface Load {
  // Sends exactly `amount` requests (each with an id never sent before)
  // over `connections` keep-alive connections and waits for every answer:
  // a run stopped by a timer would drop answers to requests the server
  // still stores, and the rows could not be checked against the 200s.
  run(amount: number): Promise<LoadResult>
}

// Every request of a bench run gets an id never sent before, whichever load
// sends it: several loads (one per connection count) share a target.
let nextId = 1

export function createLoad (url: string, token: string, connections: number): Load {
  const requests: autocannon.Request[] = [{
    method: 'POST',
    path: '/plants',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    setupRequest: (request) => {
      const id = nextId++
      return { ...request, body: `{"id":${id},"name":"Plant ${id}","tag":"bench"}` }
    }
  }]
  return {
    async run (amount) {
      let last = 0
      const started = performance.now()
      const result = await new Promise<autocannon.Result>((resolve, reject) => {
        const instance = autocannon(
          { url, connections, amount, requests, timeout: 10, sampleInt: 100 },
          (err, res) => { err === null || err === undefined ? resolve(res) : reject(err) })
        // autocannon reports on its sampling tick; the last answer marks the end.
        instance.on('response', () => { last = performance.now() })
      })
      const statusCounts: Record<string, number> = {}
      for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statusCounts[code] = stat.count ?? 0
      const responses = Object.values(statusCounts).reduce((a, b) => a + b, 0)
      const seconds = ((last === 0 ? performance.now() : last) - started) / 1000
      return {
        responses,
        ok: statusCounts['200'] ?? 0,
        statusCounts,
        errors: result.errors,
        timeouts: result.timeouts,
        seconds,
        reqPerSec: responses / seconds,
        p50: result.latency.p50,
        p99: result.latency.p99
      }
    }
  }
}
