import { posix } from 'node:path'

// A small reader of Dockerfile instructions, enough for the checks in
// dockerfile.test.ts: continuation lines, comments, exec (JSON) form and
// --flags. dockerfile-utils validates the file itself.
export interface Instruction { keyword: string, args: string, line: number }

export function parseDockerfile (text: string): Instruction[] {
  const out: Instruction[] = []
  let pending: { parts: string[], line: number } | undefined
  const lines = text.split(/\r?\n/)
  for (const [index, raw] of lines.entries()) {
    const trimmed = raw.trim()
    // Comments (and parser directives) are dropped, also inside a continuation.
    if (trimmed.startsWith('#')) continue
    if (pending === undefined && trimmed === '') continue
    const continues = /\\\s*$/.test(raw)
    const content = continues ? raw.replace(/\\\s*$/, '') : raw
    if (pending === undefined) pending = { parts: [], line: index + 1 }
    pending.parts.push(content.trim())
    if (continues) continue
    const joined = pending.parts.filter((p) => p !== '').join(' ')
    const match = /^(\S+)\s*(.*)$/.exec(joined)
    if (match !== null) out.push({ keyword: (match[1] as string).toUpperCase(), args: match[2] as string, line: pending.line })
    pending = undefined
  }
  return out
}

export interface Stage { image: string, name?: string, instructions: Instruction[] }

export function stagesOf (instructions: Instruction[]): Stage[] {
  const stages: Stage[] = []
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const { rest } = splitFlags(ins.args)
      const [image, as, name] = rest.split(/\s+/)
      stages.push({ image: image as string, ...(as?.toUpperCase() === 'AS' && name !== undefined ? { name } : {}), instructions: [] })
    } else {
      stages.at(-1)?.instructions.push(ins)
    }
  }
  return stages
}

// The argv of an exec-form instruction (["node", "x"]), or undefined for shell form.
export function execForm (args: string): string[] | undefined {
  if (!args.trim().startsWith('[')) return undefined
  try {
    const value: unknown = JSON.parse(args)
    return Array.isArray(value) && value.every((v) => typeof v === 'string') ? value : undefined
  } catch {
    return undefined
  }
}

// Leading --name=value flags and what follows them.
export function splitFlags (args: string): { flags: Record<string, string>, rest: string } {
  const flags: Record<string, string> = {}
  let rest = args.trim()
  for (;;) {
    const m = /^--([a-z-]+)(?:=(\S*))?\s*/.exec(rest)
    if (m === null) break
    flags[m[1] as string] = m[2] ?? 'true'
    rest = rest.slice(m[0].length)
  }
  return { flags, rest }
}

export const last = (stage: Stage, keyword: string): Instruction | undefined =>
  stage.instructions.filter((i) => i.keyword === keyword).at(-1)

export const all = (stage: Stage, keyword: string): Instruction[] =>
  stage.instructions.filter((i) => i.keyword === keyword)

// Where a path given in the stage lands, after the WORKDIRs before it.
export function inStage (stage: Stage, upTo: Instruction, path: string): string {
  let cwd = '/'
  for (const ins of stage.instructions) {
    if (ins === upTo) break
    if (ins.keyword === 'WORKDIR') cwd = posix.resolve(cwd, ins.args.trim())
  }
  return posix.resolve(cwd, path)
}

// .dockerignore semantics: patterns relative to the context, '*' within a
// path segment, '**' across segments, a match on a directory excludes what
// is under it, and the last matching line wins ('!' re-includes).
export function dockerignoreMatcher (text: string): (path: string) => boolean {
  const rules = text.split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!')
      const pattern = posix.normalize((negate ? l.slice(1) : l).trim()).replace(/^\/+/, '').replace(/\/+$/, '')
      const source = pattern.split('/').map((seg) => seg === '**'
        ? '.*'
        : seg.replace(/[.+^${}()|[\]\\]/g, '\\$&').replaceAll('*', '[^/]*').replaceAll('?', '[^/]')).join('/')
      return { negate, regex: new RegExp(`^${source.replaceAll('.*/', '(?:.*/)?')}$`) }
    })
  return (path) => {
    const parts = posix.normalize(path).split('/')
    const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'))
    let excluded = false
    for (const rule of rules) {
      if (prefixes.some((p) => rule.regex.test(p))) excluded = !rule.negate
    }
    return excluded
  }
}
