#!/usr/bin/env bash
# hack/progress.sh [-u UNIT] LABEL COMMAND...: run COMMAND with its output held back, and say
# every 30 s (PROGRESS_EVERY) that LABEL still runs, for how long and how many lines it has
# printed so far, so that a first build on an empty cache (minutes) is never silent. UNIT
# names those lines (default "packages compiled": COMMAND is a `go build -v` or `go vet -v`,
# whose output is the list of packages it compiles); -u '' leaves the count out (a command
# whose output is not a count of anything). On failure it prints the whole output; its exit
# status is COMMAND's.
set -uo pipefail
unit="packages compiled"
if [[ ${1:-} == -u ]]; then
  unit=$2
  shift 2
fi
label=$1
shift
every=${PROGRESS_EVERY:-30}
out=$(mktemp -t fcsi-progress.XXXXXX)
pid=
trap 'rm -f "$out"; [[ -n $pid ]] && kill "$pid" 2>/dev/null' EXIT
start=$SECONDS
"$@" >"$out" 2>&1 &
pid=$!
next=$((start + every))
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  if ((SECONDS >= next)); then
    if [[ -n $unit ]]; then
      echo "  ... $label: $((SECONDS - start)) s, $(wc -l <"$out") $unit so far"
    else
      echo "  ... $label: still running, $((SECONDS - start)) s"
    fi
    next=$((next + every))
  fi
done
wait "$pid"
rc=$?
pid=
if ((rc != 0)); then
  cat "$out" >&2
  echo "$label failed (exit $rc) after $((SECONDS - start)) s" >&2
fi
exit "$rc"
