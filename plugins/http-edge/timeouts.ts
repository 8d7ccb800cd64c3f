import type { Server } from 'node:http'
import type { FastifyHttpOptions } from 'fastify'
import type { Config } from '../../src/config.js'

// How long one client may hold a connection. Node checks the header and
// request deadlines every checkIntervalMs, so a slow client is cut off at
// most that long after its deadline, with a 408 in the Error shape.
export interface ServerTimeouts {
  // The request line and all headers must arrive within this (slowloris).
  headersTimeoutMs: number
  // The whole request, body included, must arrive within this.
  requestTimeoutMs: number
  // An idle keep-alive connection closes after this (Node adds 1 s, so a
  // client told this figure in Keep-Alive closes first). Longer than the
  // 60 s idle timeout of common load balancers, so they close first too.
  keepAliveTimeoutMs: number
  // A connection with no traffic either way while a request is open (a
  // client that stops reading the answer) closes after this. It must exceed
  // the longest a handler can take: a create waits for a writer up to
  // DB_TIMEOUT_MS, its batch is sent again while the database is away for
  // up to DB_TIMEOUT_MS more, and the last send may need a new connection
  // (DB_TIMEOUT_MS), then its statement (DB_TIMEOUT_MS on the server, + 1 s
  // for the driver's read).
  connectionTimeoutMs: number
  checkIntervalMs: number
}

export function serverTimeouts (config: Pick<Config, 'dbTimeoutMs'>, overrides: Partial<ServerTimeouts> = {}): ServerTimeouts {
  return {
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 65_000,
    connectionTimeoutMs: Math.max(60_000, 4 * config.dbTimeoutMs + 10_000),
    checkIntervalMs: 1_000,
    ...overrides
  }
}

// Node's default, stated: a header block larger than this gets 431.
export const MAX_HEADER_BYTES = 16 * 1024

// The server options that bound slow and oversized clients. Fastify sets
// requestTimeout, keepAliveTimeout and connectionTimeout on the server
// itself; headersTimeout, the check interval and the header size reach Node
// only through the `http` options it passes to http.createServer.
export function connectionLimits (t: ServerTimeouts): Pick<FastifyHttpOptions<Server>, 'http' | 'requestTimeout' | 'keepAliveTimeout' | 'connectionTimeout'> {
  return {
    http: {
      headersTimeout: t.headersTimeoutMs,
      requestTimeout: t.requestTimeoutMs,
      keepAliveTimeout: t.keepAliveTimeoutMs,
      connectionsCheckingInterval: t.checkIntervalMs,
      maxHeaderSize: MAX_HEADER_BYTES
    },
    requestTimeout: t.requestTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    connectionTimeout: t.connectionTimeoutMs
  }
}
