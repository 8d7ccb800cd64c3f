#!/usr/bin/env bash
# Deploys a new version of the app with no failed request: builds the app
# image and replaces every running replica with it. Run from the repository
# root; docker compose reads the project from the caller's environment as it
# always does (COMPOSE_FILE, COMPOSE_PROJECT_NAME):
#
#   COMPOSE_FILE=docker-compose.yml:docker-compose.scale.yml deploy/rollout.sh
#
# With n replicas running behind the proxy (docker-compose.scale.yml):
#   1. `up --no-recreate --scale app=2n` starts n new replicas beside the old
#      ones. They join Docker's DNS at once, so nginx may try one before it
#      is ready: refused, or answered 503 while its database connects, and
#      either is passed to another replica (deploy/nginx.conf).
#   2. Once every new replica is healthy (compose's healthcheck: ready), each
#      old one in turn gets `docker stop` (SIGTERM; it drains for at most 5 s
#      and exits) and is removed.
#
# Why stopping an old replica fails no request. An old replica cannot be
# taken out of DNS while it runs: Docker has no way to drop a running
# container's name, and `docker network disconnect` removes its interface
# under open connections, so requests in flight on it are never answered.
# So it stays in DNS while it drains, and nginx passes on every request that
# it cannot answer (proxy_next_upstream error timeout http_503):
#   - a new connection after its listener closed is refused: error;
#   - a connection accepted but not read when the listener closed is reset: error;
#   - a request arriving as the drain begins is answered 503 with
#     Connection: close: http_503;
#   - a request in flight is answered; one still running after 5 s is cut
#     off unanswered: error;
#   - once it has exited, nginx may hold its address for up to 2 s more
#     (resolver valid=2s), which leads nowhere: the connect times out after
#     2 s: timeout. The next old replica is stopped 3 s later, once nginx
#     has forgotten this one's address.
# No upstream connection is kept alive (nginx speaks HTTP/1.0 to the
# replicas, one connection per request), so none is closed by a replica just
# as nginx reuses it. A retried create is safe: a create is idempotent by id.
# At least n ready replicas serve throughout, so a request fails only if all
# of them fail it.
#
# One replica and no proxy (docker-compose.yml alone) is different: the app
# publishes a fixed host port, which two replicas cannot share, so the
# replica is replaced in place and requests are refused until the new one is
# ready. That deploy interrupts service.
#
# The replicas left are compose's own, created from the current files and
# image, so a later `docker compose up -d --scale app=n` keeps them. (Not
# --no-deps: it drops depends_on from the configuration that compose hashes,
# and the next plain `up` would recreate every replica.) If a new replica
# is not healthy within ROLLOUT_READY_TIMEOUT seconds (180), the new ones
# are stopped and removed, the old ones keep serving, and this exits 1.
set -euo pipefail

SERVICE=app
READY_TIMEOUT="${ROLLOUT_READY_TIMEOUT:-180}"
# Longer than nginx's resolver valid=2s (deploy/nginx.conf).
DNS_FORGET_SECONDS=3

say () { printf 'rollout: %(%H:%M:%S)T %s\n' -1 "$*"; }
die () { printf 'rollout: %s\n' "$*" >&2; exit 1; }

running () { docker compose ps --quiet --status running "$SERVICE"; }
# Container names on one line (docker's own start with a slash).
names () {
  local listed
  listed="$(docker inspect --format '{{slice .Name 1}}' "$@")"
  echo "${listed//$'\n'/ }"
}

# Until every container named is running and healthy; 1 on an exit or the timeout.
wait_healthy () {
  local deadline=$((SECONDS + READY_TIMEOUT)) id state waiting
  while true; do
    waiting=0
    for id in "$@"; do
      state="$(docker inspect --format '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$id")"
      case "$state" in
        'running healthy') ;;
        'running none') die "$SERVICE has no healthcheck: nothing tells when a new replica is ready" ;;
        running\ *) waiting=1 ;;
        *) say "$(names "$id") is $state"; return 1 ;;
      esac
    done
    ((waiting)) || return 0
    ((SECONDS < deadline)) || { say "not healthy within ${READY_TIMEOUT} s"; return 1; }
    sleep 1
  done
}

# The old replica is stopped before the new one starts: service is interrupted.
replace_in_place () {
  local n="$1"
  say "$SERVICE publishes a host port (no proxy in front): replacing it in place; requests fail until the new replica is ready"
  docker compose up --detach --force-recreate --scale "$SERVICE=$n" "$SERVICE"
  # shellcheck disable=SC2046 # one word per container id
  wait_healthy $(running) || die "the new replica is not healthy: docker compose logs $SERVICE"
}

replace_beside () {
  local n="$1" old=("${@:2}") new=() id
  docker compose up --detach --no-recreate --scale "$SERVICE=$((2 * n))" "$SERVICE"
  for id in $(running); do
    [[ " ${old[*]} " == *" $id "* ]] || new+=("$id")
  done
  ((${#new[@]} == n)) || die "expected $n new replicas, found ${#new[@]}"
  say "started $(names "${new[@]}"), waiting until healthy"
  if ! wait_healthy "${new[@]}"; then
    say "removing the new replicas; $(names "${old[@]}") keep serving"
    docker stop "${new[@]}" >/dev/null
    docker rm "${new[@]}" >/dev/null
    die "rollout abandoned: docker compose logs $SERVICE"
  fi
  for id in "${old[@]}"; do
    [[ "$id" == "${old[0]}" ]] || sleep "$DNS_FORGET_SECONDS"
    say "stopping $(names "$id") (it drains, then exits)"
    docker stop "$id" >/dev/null
    say "$(names "$id") exited $(docker inspect --format '{{.State.ExitCode}}' "$id")"
    docker rm "$id" >/dev/null
  done
}

mapfile -t old < <(running)
n="${#old[@]}"
((n > 0)) || die "no running $SERVICE replica: start the project with docker compose up first"
# Compose would start a stopped replica again, on its old image, as one of the 2n.
mapfile -t all < <(docker compose ps --all --quiet "$SERVICE")
((${#all[@]} == n)) || die "stopped $SERVICE containers exist: start them or remove them (docker compose rm $SERVICE) first"

started=$SECONDS
say "building $SERVICE"
docker compose build "$SERVICE"
say "replacing $n replica(s): $(names "${old[@]}")"
if [[ -n "$(docker port "${old[0]}")" ]]; then
  replace_in_place "$n"
else
  replace_beside "$n" "${old[@]}"
fi
mapfile -t now < <(running)
((${#now[@]} == n)) || die "${#now[@]} replicas running, expected $n"
say "done in $((SECONDS - started)) s: $(names "${now[@]}") on image $(docker inspect --format '{{.Image}}' "${now[0]}")"
