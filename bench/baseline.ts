import Fastify from 'fastify'

// The yardstick: Fastify parsing the same JSON body (with its default
// parser) and answering 200, with no auth, no validation and no database.
// The service's figures are read as a ratio of this server's on the same
// machine in the same run.
const app = Fastify({ logger: false })

app.post('/plants', async (request) => {
  const { name, tag } = request.body as { name?: unknown, tag?: unknown }
  return tag === undefined ? { name } : { name, tag }
})
app.get('/health/ready', async () => ({ status: 'ready' }))

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => { app.close().then(() => process.exit(0), () => process.exit(1)) })
}
