import net from 'node:net'

// A TCP proxy the tests put between the service and PostgreSQL, to break the
// network on purpose:
// - cut('reset'): every open connection is reset and new ones are reset at
//   once (the server went away: the client sees ECONNRESET);
// - cut('blackhole'): nothing moves any more in either direction and new
//   connections are accepted but never answered (a partition: the client
//   sees nothing at all, only its own timeouts can help);
// - restore(): traffic flows again; stalled bytes are delivered, as TCP
//   would after a partition heals;
// - setLatency(ms): every chunk is delayed by ms in each direction;
// - cutInFlight(mode, waitMs): cut(mode) the moment bytes are held by the
//   latency, so a statement or its result is lost on the wire;
// - holdReplies(true): the server's bytes are held, the client's still
//   delivered (a statement arrives and runs, its reply is late);
//   holdReplies(false) delivers what was held, in order.
export type CutMode = 'reset' | 'blackhole'

export interface TcpProxy {
  readonly port: number
  // The URL with its host and port replaced by the proxy's.
  via(url: string): string
  cut(mode: CutMode): void
  // Cuts the moment bytes are on the wire (held back by the latency): at
  // once if some are, else as the next chunk arrives, or after waitMs with
  // none. Resolves with the chunks that were on the wire.
  cutInFlight(mode: CutMode, waitMs: number): Promise<number>
  restore(): void
  setLatency(ms: number): void
  holdReplies(on: boolean): void
  // Connections currently open through the proxy.
  open(): number
  close(): Promise<void>
}

interface Direction {
  from: net.Socket
  to: net.Socket
  // Server to client: held while replies are held.
  replies: boolean
  queue: Array<{ chunk: Buffer, due: number }>
  timer?: NodeJS.Timeout
}

interface Pair {
  client: net.Socket
  upstream?: net.Socket
  directions: Direction[]
}

export async function startTcpProxy (target: { host?: string, port: number }): Promise<TcpProxy> {
  const host = target.host ?? '127.0.0.1'
  const pairs = new Set<Pair>()
  let state: 'open' | CutMode = 'open'
  let latency = 0
  let holding = false
  // A cut waiting for bytes on the wire (cutInFlight).
  let cutWhenInTransit: (() => void) | undefined
  const inTransit = (): number => [...pairs].reduce((n, pair) => n + pair.directions.reduce((m, d) => m + d.queue.length, 0), 0)

  const destroyPair = (pair: Pair): void => {
    for (const d of pair.directions) clearTimeout(d.timer)
    pair.client.destroy()
    pair.upstream?.destroy()
    pairs.delete(pair)
  }

  const resetPair = (pair: Pair): void => {
    for (const d of pair.directions) clearTimeout(d.timer)
    pair.client.resetAndDestroy()
    pair.upstream?.resetAndDestroy()
    pairs.delete(pair)
  }

  // Chunks keep their order: a chunk is due no earlier than the one before.
  const pump = (d: Direction): void => {
    clearTimeout(d.timer)
    d.timer = undefined
    if (state !== 'open' || (holding && d.replies)) return
    const now = Date.now()
    while (d.queue.length > 0 && (d.queue[0] as { due: number }).due <= now) {
      const { chunk } = d.queue.shift() as { chunk: Buffer }
      if (!d.to.destroyed) d.to.write(chunk)
    }
    if (d.queue.length > 0) d.timer = setTimeout(() => pump(d), (d.queue[0] as { due: number }).due - now)
  }

  const forward = (from: net.Socket, to: net.Socket, replies: boolean): Direction => {
    const d: Direction = { from, to, replies, queue: [] }
    from.on('data', (chunk: Buffer) => {
      const last = d.queue.at(-1)?.due ?? 0
      d.queue.push({ chunk, due: Math.max(Date.now() + latency, last) })
      pump(d)
      if (cutWhenInTransit !== undefined && inTransit() > 0) cutWhenInTransit()
    })
    return d
  }

  const connectUpstream = (pair: Pair): void => {
    const upstream = net.connect({ host, port: target.port })
    pair.upstream = upstream
    upstream.on('error', () => destroyPair(pair))
    upstream.on('close', () => destroyPair(pair))
    pair.directions = [forward(pair.client, upstream, false), forward(upstream, pair.client, true)]
    pair.client.resume()
  }

  const cut = (mode: CutMode): void => {
    state = mode
    for (const pair of [...pairs]) {
      if (mode === 'reset') {
        resetPair(pair)
      } else {
        pair.client.pause()
        pair.upstream?.pause()
        for (const d of pair.directions) clearTimeout(d.timer)
      }
    }
  }

  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    const pair: Pair = { client, directions: [] }
    client.on('error', () => destroyPair(pair))
    client.on('close', () => destroyPair(pair))
    if (state === 'reset') {
      client.resetAndDestroy()
      return
    }
    pairs.add(pair)
    // Held paused; restore() connects it.
    if (state === 'blackhole') return
    connectUpstream(pair)
  })

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const port = (server.address() as net.AddressInfo).port

  return {
    port,
    via (url) {
      const u = new URL(url)
      u.hostname = '127.0.0.1'
      u.port = String(port)
      return u.toString()
    },
    async cutInFlight (mode, waitMs) {
      return await new Promise<number>((resolve) => {
        const cutNow = (): void => {
          cutWhenInTransit = undefined
          clearTimeout(timer)
          const onTheWire = inTransit()
          cut(mode)
          resolve(onTheWire)
        }
        const timer = setTimeout(cutNow, waitMs)
        cutWhenInTransit = cutNow
        if (inTransit() > 0) cutNow()
      })
    },
    cut,
    restore () {
      state = 'open'
      for (const pair of pairs) {
        if (pair.upstream === undefined) {
          connectUpstream(pair)
          continue
        }
        pair.client.resume()
        pair.upstream.resume()
        for (const d of pair.directions) pump(d)
      }
    },
    setLatency (ms) { latency = ms },
    holdReplies (on) {
      holding = on
      if (!on) for (const pair of pairs) for (const d of pair.directions) pump(d)
    },
    open: () => pairs.size,
    async close () {
      for (const pair of [...pairs]) destroyPair(pair)
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
