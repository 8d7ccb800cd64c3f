import t from 'tap'
import { backends, buildTestApp, postPlant, TOKEN, auth } from '../helper.js'
import { loggerOptions } from '../../src/logger.js'

for (const backend of backends()) {
  t.test(`logs on ${backend}`, async (t) => {
    const lines: string[] = []
    // The service's own logger settings (src/logger.ts), into memory.
    const { app } = await buildTestApp(t, backend, {}, {
      ...(loggerOptions({ logLevel: 'trace', production: true }) as object),
      stream: { write: (line: string) => { lines.push(line) } }
    })

    await postPlant(app, '{"id": 1, "name": "Logged"}')
    await postPlant(app, '{"id": 1, "name": "Conflict"}')
    await postPlant(app, '{"id": "bad"}')
    await app.inject({ method: 'POST', url: '/plants', headers: { authorization: `Bearer ${TOKEN}x`, 'content-type': 'application/json' }, payload: '{}' })
    await app.inject({ url: '/nope', headers: auth() })
    await app.inject({ url: '/health/ready', headers: { 'x-request-id': 'trace-me-42' } })

    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
    t.ok(parsed.length > 10, 'lines were written')
    t.notOk(lines.some((l) => l.includes(TOKEN)), 'no line holds a token')
    const requestLines = parsed.filter((l) => l.req !== undefined || l.res !== undefined || l.msg === 'request rejected')
    t.ok(requestLines.length > 0)
    t.ok(requestLines.every((l) => typeof l.reqId === 'string' && l.reqId.length > 0), 'request lines carry the request id')
    t.ok(parsed.some((l) => l.reqId === 'trace-me-42'), 'an incoming X-Request-Id is used in the log')
    t.ok(parsed.some((l) => l.msg === 'plant create' && l.plantId === '1' && l.outcome === 'created'), 'creates are logged with the id and outcome')
    t.ok(parsed.some((l) => l.msg === 'request rejected' && l.status === 409), 'a conflict is logged with its status')
  })
}
