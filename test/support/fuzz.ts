// One fuzz budget for every test that generates its cases, read from the environment. FUZZ_RUNS is the number of
// requests the largest fuzz sends (test/api/hostile.test.ts, 10,000 in full), and every other fuzz runs the same
// share of its own full size. Unset, the budget is full, as npm test and CI run it; npm run test:quick sets a small
// one, so the inner loop stays quick and the full fuzz still runs before anything lands.
export const FULL_FUZZ_RUNS = 10_000

function budget (): number {
  const text = process.env.FUZZ_RUNS
  if (text === undefined || text === '') return FULL_FUZZ_RUNS
  const runs = Number(text)
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`FUZZ_RUNS must be a whole number of runs, not ${JSON.stringify(text)}`)
  return runs
}

const share = budget() / FULL_FUZZ_RUNS

// How many cases a fuzz runs: `full` under the full budget, that share of it under a smaller one, and never fewer
// than `least` (or `full`, when it is smaller).
export function fuzzRuns (full: number, least = 10): number {
  return Math.max(Math.min(least, full), Math.round(full * share))
}
