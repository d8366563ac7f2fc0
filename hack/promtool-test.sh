#!/usr/bin/env bash
# `make test` (monitoring part): promtool (pinned in tools/promtool/go.mod, its own module so
# the Prometheus dependency tree stays out of the main module and of tools/go.mod) checks the
# alerting rules and runs their unit tests; the Go test in deploy/monitoring checks that the
# PrometheusRule matches rules.yaml and that every alert has a runbook section and tests.
set -euo pipefail
cd "$(dirname "$0")/.."

promtool() { go tool -modfile=tools/promtool/go.mod promtool "$@"; }

# The first build of promtool compiles Prometheus and its service discovery (~10 min on 2
# cores); say so rather than look hung. Later runs take it from the Go build cache.
echo "promtool: building (the first time takes several minutes) and checking deploy/monitoring"

promtool check rules deploy/monitoring/rules.yaml
promtool test rules deploy/monitoring/rules_test.yaml
go test -count=1 ./deploy/monitoring/
