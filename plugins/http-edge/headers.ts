// The headers every answer carries, whoever gives it (Fastify's replies,
// the answers to malformed HTTP and to an unmet Expect): the request id, so
// a caller can find its request in the logs, and nosniff, so no browser
// second-guesses a content type (the 404 message echoes the URL).
export function everyAnswerHeaders (reqId: string): Record<string, string> {
  return { 'x-request-id': reqId, 'x-content-type-options': 'nosniff' }
}
