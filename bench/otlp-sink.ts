import { createServer } from 'node:http'
import { once } from 'node:events'

// An OTLP/HTTP receiver that accepts and discards spans, so a traced
// service in the benchmark exports for real without a collector.
export async function startOtlpSink (): Promise<{ url: string, exports: () => number, close: () => Promise<void> }> {
  let exports = 0
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      exports++
      res.writeHead(200, { 'content-type': 'application/x-protobuf' })
      res.end()
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    exports: () => exports,
    close: async () => {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    }
  }
}
