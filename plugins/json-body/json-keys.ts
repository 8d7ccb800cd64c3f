// The keys of a JSON text read one by one: which key came twice, and whether
// JSON.parse kept the text's keys (V8 in Node 24 and 26 can misread an escaped
// key, `"\u0041"`, as one an earlier body used; each key parsed alone is right).

// The index of the quote that ends the string opened at `start` (the end of
// the text if none does): the next quote not escaped by an odd run of
// backslashes. indexOf skips a long string far faster than a loop.
export function stringEnd (text: string, start: number): number {
  let end = start
  for (;;) {
    end = text.indexOf('"', end + 1)
    if (end === -1) return text.length
    let slashes = 0
    while (text.charCodeAt(end - 1 - slashes) === 0x5c /* \ */) slashes++
    if (slashes % 2 === 0) return end
  }
}

export interface TextKey { key: string, position: number, object: number }

// Every key of a valid JSON text, in order, with the number of its object
// (objects numbered by their '{'). A key is the string after '{' or after a
// ',' in an object; valid JSON needs no other check.
export function textKeys (text: string): TextKey[] {
  const keys: TextKey[] = []
  const open: number[] = [] // each open object's number, -1 for an array
  let objects = 0
  let keyNext = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i)
      if (keyNext) keys.push({ key: JSON.parse(text.slice(i, end + 1)) as string, position: i, object: open.at(-1) as number })
      keyNext = false
      i = end
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      open.push(c === 0x7b ? objects++ : -1)
      keyNext = c === 0x7b
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      open.pop()
    } else if (c === 0x2c /* , */) {
      keyNext = (open.at(-1) ?? -1) >= 0
    }
  }
  return keys
}

// The first key that repeats one of its object.
export function repeatedKey (keys: TextKey[]): TextKey | undefined {
  const seen = new Set<string>()
  for (const key of keys) {
    const id = `${key.object}:${key.key}`
    if (seen.has(id)) return key
    seen.add(id)
  }
  return undefined
}

// Whether a parsed value holds exactly the keys of the text it came from.
export function sameKeys (keys: TextKey[], value: unknown): boolean {
  const parsed: string[] = []
  collectKeys(value, parsed)
  if (parsed.length !== keys.length) return false
  const written = keys.map(key => key.key).sort()
  return parsed.sort().every((key, i) => key === written[i])
}

function collectKeys (value: unknown, into: string[]): void {
  if (typeof value !== 'object' || value === null) return
  if (!Array.isArray(value)) for (const key of Object.keys(value)) into.push(key)
  for (const item of Object.values(value)) collectKeys(item, into)
}
