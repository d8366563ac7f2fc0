#!/usr/bin/env bash
# Runs every Go fuzz target for FUZZTIME each (default 60s; `make fuzz FUZZTIME=...`). The seed
# corpora run in every plain `go test` (make test, make test-all) anyway; this adds
# generated inputs. A failure leaves the failing input under the package's testdata/fuzz/ for
# `go test -run` to replay, and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-60s}
# package and target, one pair per line: the fake cloud's request handling, the identifier
# checks every layer shares, and the CSI controller's request validation.
targets=(
  "./pkg/cloud/server FuzzHandler"
  "./pkg/cloud FuzzCheckID"
  "./pkg/csi FuzzControllerValidation"
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "== fuzz $name ($pkg) for $FUZZTIME"
  start=$SECONDS
  # -run '^$' skips the unit tests; go test -fuzz takes one target of one package at a time.
  # It prints its own progress every few seconds.
  nice -n 10 go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"
  echo "== fuzz $name: ok in $((SECONDS - start))s"
done
