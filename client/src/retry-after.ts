// Retry-After (RFC 9110, 10.2.3) in seconds: delay-seconds, or an HTTP-date
// turned into the seconds from now (never negative). Anything else is no
// advice at all: undefined.
export function retryAfterSeconds (value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text)
  // HTTP dates end in GMT; Date.parse alone would take '-1' as a year.
  const date = text.endsWith(' GMT') ? Date.parse(text) : Number.NaN
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000))
}
