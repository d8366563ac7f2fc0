#!/usr/bin/env bash
# `make test-rules`, and the rules part of `make test` and `make test-all`: promtool checks the
# alerting rules and runs their unit tests; the Go test in deploy/monitoring checks that the
# PrometheusRule matches rules.yaml and that every alert has a runbook section and tests. The
# pinned promtool has its own module (tools/promtool/go.mod) so the Prometheus dependency tree
# stays out of the main module and of tools/go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."

# PROMTOOL picks the promtool:
#   unset    the first found of: promtool on PATH (Debian's prometheus package installs one),
#            the Debian one an earlier PROMTOOL=debian run cached, else the pinned one (below).
#            With PROMTOOL_OPTIONAL=1 (`make test`) it skips the promtool checks instead of
#            building the pinned one, and says so; `make test-all` and CI never skip.
#   debian   the static binary of Debian's prometheus package (apt-get download + dpkg-deb -x,
#            cached by package version, a few seconds); CI uses it.
#   pinned   the one pinned in tools/promtool/go.mod, built into bin/promtool (the first build
#            compiles Prometheus and its service discovery: ~10-14 min on 2 cores, a progress
#            line every 30 s).
#   PATH     any other value: that promtool binary.
# The rules use nothing newer than Prometheus 2.42 (Debian 12's), and all give the same results.
# RULES_GO_TEST=0 leaves out the Go test of deploy/monitoring (make test and make test-all run
# it with the rest of the main module).
PROMTOOL=${PROMTOOL:-}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/fakecloud-csi/promtool
if [[ -z "$PROMTOOL" ]]; then
  if command -v promtool >/dev/null 2>&1; then
    PROMTOOL=$(command -v promtool)
  elif cached=$(ls -t "$cache"/debian-*/promtool 2>/dev/null | head -n 1) && [[ -n "$cached" ]]; then
    PROMTOOL=$cached
  elif [[ ${PROMTOOL_OPTIONAL:-0} == 1 ]]; then
    echo "promtool: none found, so the alert rules' promtool checks are SKIPPED (apt-get install prometheus," \
      "or PROMTOOL=debian make test-rules fetches Debian's in seconds; make test-all never skips them)"
    PROMTOOL=skip
  else
    PROMTOOL=pinned
  fi
fi
case "$PROMTOOL" in
skip) ;;
pinned)
  echo "promtool: tools/promtool/go.mod's, built into bin/promtool (the first build takes ~10-14 min on 2 cores)"
  (cd tools/promtool && ../../hack/progress.sh "go build bin/promtool" \
    go build -v -o ../../bin/promtool github.com/prometheus/prometheus/cmd/promtool)
  promtool() { bin/promtool "$@"; }
  ;;
debian)
  version=$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [[ -z "$version" || "$version" == "(none)" ]]; then
    echo "PROMTOOL=debian: apt knows no prometheus package (apt-get update?)" >&2
    exit 1
  fi
  bin=$cache/debian-${version//[:+~]/_}/promtool
  if [[ ! -x "$bin" ]]; then
    echo "promtool: fetching Debian's prometheus $version"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # apt's sandbox user cannot write into a root-owned mktemp dir; downloading as root is fine.
    (cd "$tmp" && apt-get download -q "prometheus=$version" 2>&1 | grep -v 'unsandboxed' || true)
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
    mkdir -p "$(dirname "$bin")"
    install -m 0755 "$tmp/x/usr/bin/promtool" "$bin.tmp" && mv "$bin.tmp" "$bin"
  fi
  echo "promtool: Debian's prometheus $version ($bin)"
  promtool() { "$bin" "$@"; }
  ;;
*)
  echo "promtool: $PROMTOOL"
  promtool() { "$PROMTOOL" "$@"; }
  ;;
esac

if [[ "$PROMTOOL" != skip ]]; then
  promtool check rules deploy/monitoring/rules.yaml
  promtool test rules deploy/monitoring/rules_test.yaml
fi
if [[ ${RULES_GO_TEST:-1} != 0 ]]; then
  go test -count=1 ./deploy/monitoring/
fi
