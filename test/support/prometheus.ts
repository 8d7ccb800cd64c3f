// Reading the Prometheus text format in tests: one sample per line,
// `name{label="value",...} number`.

export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export function parseSamples (text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) throw new Error(`not a Prometheus sample: ${line}`)
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[key as string] = value as string
    }
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) })
  }
  return samples
}

// The value of the one sample with this name and (at least) these labels;
// 0 when there is none, as Prometheus reads a series not yet created.
export function valueOf (samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`)
  return found[0]?.value ?? 0
}

// The metrics URL the service logged once its listener was up.
export function metricsUrlOf (logLines: string[]): string {
  for (const line of logLines) {
    const match = /metrics served at (http:\/\/[^\s"]+)/.exec(line)
    if (match !== null) return match[1] as string
  }
  throw new Error('the service did not log where metrics are served')
}

// Prometheus's HTTP API (`/api/v1/…`), as the compose test reads it.
export interface Target { labels: Record<string, string>, health: string, scrapeUrl: string, lastError: string }
export interface Alert { labels: Record<string, string>, state: 'pending' | 'firing', activeAt: string }

async function api<T> (base: string, path: string): Promise<T> {
  const res = await fetch(`${base}/api/v1/${path}`, { signal: AbortSignal.timeout(5000) })
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`)
  return ((await res.json()) as { data: T }).data
}

export const activeTargets = async (base: string): Promise<Target[]> =>
  (await api<{ activeTargets: Target[] }>(base, 'targets?state=active')).activeTargets

// Pending and firing alerts.
export const activeAlerts = async (base: string): Promise<Alert[]> =>
  (await api<{ alerts: Alert[] }>(base, 'alerts')).alerts
