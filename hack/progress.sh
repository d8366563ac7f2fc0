#!/usr/bin/env bash
# hack/progress.sh LABEL COMMAND...: run COMMAND (a `go build -v`, whose output is the list of
# packages it compiles) with its output held back, and say every 30 s that LABEL still runs,
# for how long and how many lines (packages) it has printed, so that a first build on an empty
# cache (minutes) is never silent. On failure it prints the whole output; its exit status is
# COMMAND's.
set -uo pipefail
label=$1
shift
out=$(mktemp -t fcsi-progress.XXXXXX)
trap 'rm -f "$out"' EXIT
start=$SECONDS
"$@" >"$out" 2>&1 &
pid=$!
next=$((start + 30))
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  if ((SECONDS >= next)); then
    echo "  ... $label: $((SECONDS - start)) s, $(wc -l <"$out") packages compiled so far"
    next=$((next + 30))
  fi
done
wait "$pid"
rc=$?
if ((rc != 0)); then
  cat "$out" >&2
  echo "$label failed (exit $rc) after $((SECONDS - start)) s" >&2
fi
exit "$rc"
