// PostgreSQL text cannot hold U+0000, and a lone UTF-16 surrogate cannot be
// encoded as UTF-8 at all (Node would write U+FFFD). Either would mean storing
// something other than what the client sent, so such strings are refused.
export function isStorableText (text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed()
}

// The first stored string field that cannot be stored exactly, if any.
export function unstorableField (fields: Record<string, string | undefined>): string | undefined {
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && !isStorableText(value)) return name
  }
  return undefined
}
