import { readdirSync, readFileSync } from 'node:fs'

const TICKS_PER_SECOND = 100

// CPU seconds (user + system) a process has used so far, with those of its
// ended children when asked; 0 once it is gone.
export function cpuSeconds (pid: number, withEndedChildren = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name, which is in parentheses and may hold
    // spaces: utime, stime, cutime, cstime are the 14th to 17th of stat.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const own = Number(fields[11]) + Number(fields[12])
    return (withEndedChildren ? own + Number(fields[13]) + Number(fields[14]) : own) / TICKS_PER_SECOND
  } catch {
    return 0
  }
}

// CPU seconds used so far by every process named `name` (e.g. the
// PostgreSQL server and its backends), those that have ended included: a
// backend that exits takes its own times with it, and they reappear in
// its parent's (the postmaster's) times of waited-for children.
export function cpuSecondsOf (name: string): number {
  let total = 0
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) total += cpuSeconds(Number(entry), true)
    } catch {}
  }
  return total
}
