#!/usr/bin/env bash
# hack/heartbeat.sh LABEL: copy standard input to standard output a line at a time and, when no
# line has come for 25 s (HEARTBEAT_QUIET), say that LABEL still runs and for how long. gotestsum
# prints a line per package as its tests end, but nothing while go test compiles (minutes on a
# cold cache): piped through this, a `make test` run is never silent for more than 30 s.
# The pipeline's status stays the writer's (set -o pipefail in the Makefile).
set -uo pipefail
label=$1
quiet=${HEARTBEAT_QUIET:-25}
start=$SECONDS
while :; do
  line='' rc=0
  IFS= read -r -t "$quiet" line || rc=$?
  if ((rc == 0)); then
    printf '%s\n' "$line"
    continue
  fi
  if [[ -n $line ]]; then printf '%s\n' "$line"; fi # a partial line, or a last one without \n
  if ((rc <= 128)); then break; fi                    # end of input (> 128: timed out)
  echo "  ... $label: still compiling or testing, $((SECONDS - start)) s"
done
