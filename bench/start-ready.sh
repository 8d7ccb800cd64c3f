#!/usr/bin/env bash
# start-ready.sh [DIR]: runs `npm start` in DIR (default: this checkout),
# prints the seconds until GET /health/ready first answers 200, then stops the
# service with SIGTERM and waits for it. The environment picks the database
# (DATABASE_URL, else PGlite in DIR/.data/pglite or PGLITE_DATA_DIR).
# START_LOG names a file for the service's output (default: discarded).
set -euo pipefail
dir="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })')"
now () { date +%s.%N; }
started="$(now)"
cd "$dir"
PORT="$port" HOST=127.0.0.1 API_TOKENS="${API_TOKENS:-start-ready-token}" \
  setsid npm start >>"${START_LOG:-/dev/null}" 2>&1 &
pid=$!
trap 'kill -TERM -- "-$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
until [[ "$(curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$port/health/ready")" == 200 ]]; do
  kill -0 "$pid" 2>/dev/null || { echo "start-ready: npm start exited before it was ready" >&2; exit 1; }
  awk -v s="$started" -v n="$(now)" 'BEGIN { exit !(n - s > 120) }' && { echo "start-ready: not ready within 120 s" >&2; exit 1; }
  sleep 0.05
done
awk -v s="$started" -v n="$(now)" 'BEGIN { printf "%.2f\n", n - s }'
