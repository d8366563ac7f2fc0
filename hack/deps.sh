#!/usr/bin/env bash
# hack/deps.sh MODULE_DIR...: download what each Go module of the repo needs (go mod download:
# the modules its packages and their tests import) with one line per module dir, instead of a
# `go: downloading` line per dependency from whichever go command first needs it. Every 30 s
# it says how many dependencies have arrived. When all are cached it takes a second or two.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

cache=$(go env GOMODCACHE)/cache/download
# zips: how many module zips the module cache holds (one per downloaded module version).
zips() { { find "$cache" -name '*.zip' 2>/dev/null || true; } | wc -l; }
log=$(mktemp -t fcsi-deps.XXXXXX)
pid=
trap 'rm -f "$log"; [[ -n $pid ]] && kill "$pid" 2>/dev/null' EXIT
trap 'exit 143' TERM INT # so that the EXIT trap stops go mod download too
for m in "$@"; do
  before=$(zips) start=$SECONDS
  # go mod download prints nothing but errors; the progress lines are ours.
  (cd "$root/$m" && go mod download) >"$log" 2>&1 &
  pid=$!
  next=$((start + 30))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)); then
      echo "  ... go mod download ($m): $(($(zips) - before)) modules downloaded so far, $((SECONDS - start)) s"
      next=$((next + 30))
    fi
  done
  rc=0
  wait "$pid" || rc=$?
  pid=
  if ((rc != 0)); then
    cat "$log" >&2
    echo "go mod download ($m) failed (exit $rc)" >&2
    exit "$rc"
  fi
  echo "dependencies of $m: $(($(zips) - before)) modules downloaded, the rest cached ($((SECONDS - start)) s)"
done
