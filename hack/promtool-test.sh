#!/usr/bin/env bash
# `make test` (monitoring part): promtool (pinned in tools/promtool/go.mod, its own module so
# the Prometheus dependency tree stays out of the main module and of tools/go.mod) checks the
# alerting rules and runs their unit tests; the Go test in deploy/monitoring checks that the
# PrometheusRule matches rules.yaml and that every alert has a runbook section and tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# PROMTOOL picks the promtool: unset, the one pinned in tools/promtool/go.mod (its first build
# compiles Prometheus and its service discovery, ~10 min on 2 cores); `debian`, the static binary
# of Debian's prometheus package (apt-get download + dpkg-deb -x, cached by package version, a
# few seconds; CI uses it to keep its cold time); or a path to any promtool. The rules use nothing
# newer than Prometheus 2.42 (Debian 12's), and both give the same results on them.
PROMTOOL=${PROMTOOL:-}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/fakecloud-csi/promtool
case "$PROMTOOL" in
'')
  echo "promtool: tools/promtool/go.mod's (the first build takes several minutes)"
  promtool() { go tool -modfile=tools/promtool/go.mod promtool "$@"; }
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

promtool check rules deploy/monitoring/rules.yaml
promtool test rules deploy/monitoring/rules_test.yaml
go test -count=1 ./deploy/monitoring/
