import { readdirSync, readFileSync } from 'node:fs'

const TICKS_PER_SECOND = 100

// CPU seconds (user + system) a process has used so far; 0 once it is gone.
export function cpuSeconds (pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND
  } catch {
    return 0
  }
}

// CPU seconds used so far by every process named `name` (e.g. the
// PostgreSQL server and its backends).
export function cpuSecondsOf (name: string): number {
  let total = 0
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) total += cpuSeconds(Number(entry))
    } catch {}
  }
  return total
}
