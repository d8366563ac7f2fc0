#!/usr/bin/env bash
# `make bench`: every benchmark the README quotes, in one run on this machine, then the
# capacity-policy comparison. Figures are ratios measured side by side in the same run, so
# they travel between machines better than absolute numbers do.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-2s}
# The fleet simulation's size: the README's table is FLEET_NODES=10000 (about 50 CPU-s per
# run on the development machine); 1000 keeps `make bench` to a minute or two.
FLEET_NODES=${FLEET_NODES:-1000}

echo "== fake cloud store alone: attach+detach on disk, 1 and 64 callers, mutations per commit"
go test -run '^$' -bench . -benchtime "$BENCHTIME" ./pkg/cloud/server/store/ 2>/dev/null | grep -E '^(Benchmark|ok|FAIL)'
echo
echo "== fake cloud: attach+detach through HTTP, durable store vs a bare mux JSON handler"
go test -run '^$' -bench . -benchtime "$BENCHTIME" ./bench/cloud/ 2>/dev/null | grep -E '^(Benchmark|ok|FAIL)'
echo
echo "== driver: NodeGetInfo (warm cache, production lookup interval) vs a bare gRPC unary call; ControllerPublishVolume through driver + cloud"
go test -run '^$' -bench . -benchtime "$BENCHTIME" ./bench/driver/ 2>/dev/null | grep -E '^(Benchmark|ok|FAIL)'
echo
echo "== capacity policy: static vs naive vs ours on the same traces (seeded, deterministic)"
go run ./bench/policy
echo
echo "== capacity at fleet scale: the policy on $FLEET_NODES simulated nodes, periods 10, 30, 60 s (seeded, deterministic; rows also in _output/bench/fleet.jsonl)"
mkdir -p _output/bench
go run ./bench/policy -fleet -fleet-nodes="$FLEET_NODES" -fleet-duration=30m -fleet-scenarios=steady,quota-cut -fleet-json=_output/bench/fleet.jsonl  # progress on stderr
