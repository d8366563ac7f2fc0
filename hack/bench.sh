#!/usr/bin/env bash
# `make bench`: every benchmark docs/figures.md quotes, in one run on this machine, then the
# capacity-policy comparison. Figures are ratios measured side by side in the same run, so
# they travel between machines better than absolute numbers do. The run starts with a header
# (date, commit, load, Go, GOMAXPROCS and the disk's fdatasync latency, measured then where
# the store benchmarks keep their files) that every figure below it is read with; the same
# header heads each _output/bench/*.txt. docs/figures.md quotes only what this prints.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-2s}
# The fleet simulation's size: docs/fleet-scale.md's tables are FLEET_NODES=10000 (18-25 CPU-s per
# run on the development machine); 1000 keeps `make bench` to a minute or two.
FLEET_NODES=${FLEET_NODES:-1000}
# NodeGetInfo's runs (the median of them is the figure) and the memory section's fake cloud port:
# checked before anything runs.
NODEINFO_COUNT=${NODEINFO_COUNT:-5}
BENCH_CLOUD_PORT=${BENCH_CLOUD_PORT:-18481}
if ! [[ $NODEINFO_COUNT =~ ^[0-9]+$ ]] || ((NODEINFO_COUNT < 1 || NODEINFO_COUNT > 50)); then
	echo "bench.sh: NODEINFO_COUNT must be a number of runs in 1..50, got '$NODEINFO_COUNT'" >&2
	exit 2
fi
if ! [[ $BENCH_CLOUD_PORT =~ ^[0-9]+$ ]] || ((BENCH_CLOUD_PORT < 1024 || BENCH_CLOUD_PORT > 65535)); then
	echo "bench.sh: BENCH_CLOUD_PORT must be a port in 1024..65535, got '$BENCH_CLOUD_PORT'" >&2
	exit 2
fi

mkdir -p _output/bench

# header is what every figure of this run is read with: when, which code, how busy the machine
# was and how slow its disk's fdatasync (two per durable commit) was right then, on the
# filesystem of the benchmarks' temporary stores (bench/fsync).
header() {
	local fsync
	fsync=$(go run ./bench/fsync) || fsync="fdatasync not measured (go run ./bench/fsync failed)"
	echo "make bench $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git describe --always --dirty 2>/dev/null || echo unknown), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown), $fsync"
}
HEADER=$(header)
echo "$HEADER"
echo

# section starts _output/bench/<name>.txt with the run's header and the load as the section
# starts (a run takes minutes, and other work on the machine comes and goes).
section() {
	printf '%s\n%s section, load %s\n' "$HEADER" "$1" "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)" | tee "_output/bench/$1.txt" | tail -1
}

# rows keeps go test -bench's result rows, each whole on one line, and its ok/FAIL lines.
# go test prints a row's name when the run starts and its figures when it ends; a line the
# code under test writes in between (the test binary's stderr comes with its stdout) ends up
# after the name and moves the figures to a line of their own, which starts with blanks and
# the iteration count. rows joins such figures back to their name and drops the stray lines.
rows() {
	awk '
		/^Benchmark[^ \t]*[ \t]+[0-9]+\t/ { print; name = ""; next } # a whole row
		/^Benchmark/ { name = $1; next }                            # a name, figures to come
		/^[ \t]+[0-9]+\t/ && name != "" { sub(/^[ \t]+/, ""); print name "\t" $0; name = ""; next }
		/^(ok|FAIL|--- FAIL)/ { print }
	'
}

# require fails the run, saying so, when the benchmark rows in file print no figure named
# metric: docs/figures.md quotes it, and a run that lost it would otherwise pass unnoticed.
require() {
	local file=$1 metric=$2
	if ! grep -qE "[0-9] ${metric}([[:space:]]|\$)" "$file"; then
		echo "bench.sh: no ${metric} figure in the rows above ($file): docs/figures.md's figure is missing; rerun that go test without this filter to see why" >&2
		exit 1
	fi
}

# Each section's rows are also kept in _output/bench/<section>.txt, after the header.
echo "== fake cloud store alone: attach+detach on disk, 1 and 64 callers, mutations per commit"
section store
go test -run '^$' -bench . -benchtime "$BENCHTIME" ./pkg/cloud/server/store/ 2>/dev/null | rows | tee -a _output/bench/store.txt
require _output/bench/store.txt mutations/commit
echo
echo "== fake cloud: attach+detach through HTTP, durable store vs a bare mux JSON handler (ratio rows: durable/bare, throughput; cpu-bare/durable, CPU per op)"
section cloud
go test -run '^$' -bench . -benchtime "$BENCHTIME" ./bench/cloud/ 2>/dev/null | rows | tee -a _output/bench/cloud.txt
require _output/bench/cloud.txt durable/bare
require _output/bench/cloud.txt cpu-bare/durable
# The disk again, after the two sections it bounds: a figure above is suspect if it moved much.
echo "fdatasync after the store and cloud sections: $(go run ./bench/fsync || echo 'not measured')" | tee -a _output/bench/cloud.txt
echo
echo "== driver: NodeGetInfo (warm cache, production lookup interval) vs a bare gRPC health check (grpc.health.v1 Check), all on unix sockets: p99-ratio is nodeinfo-p99-ns / echo-p99-ns (gRPC's default server), p99-ratio-workers is nodeinfo-p99-ns / workers-p99-ns (a bare server with the driver's stream workers); ControllerPublishVolume through driver + cloud (publishes/s); publish and unpublish latency with 300 ms and 0 ms cloud transitions, and each call's lag behind the cloud's transition (publish-lag-p50-ms, ...; target within 10 ms)"
section driver
# NodeGetInfo's p99 is the 1% slowest of a few thousand calls per side, so one scheduler hiccup
# or GC cycle on one side moves a single run's ratio by 5-10% (quiet machine, 2 cores: 0.95-1.09
# in six runs): it runs NODEINFO_COUNT times and the figure is the median, with the range.
go test -run '^$' -bench 'NodeGetInfoVsEcho' -count "$NODEINFO_COUNT" -benchtime "$BENCHTIME" ./bench/driver/ 2>/dev/null | rows | tee -a _output/bench/driver.txt
median_of() { # METRIC [FILE BENCHMARK]: the median and range of METRIC over BENCHMARK's rows in FILE (default: NodeGetInfoVsEcho's in driver.txt)
	awk -v m="$1" -v b="^${3:-BenchmarkNodeGetInfoVsEcho}" '$1 ~ b { for (i = 2; i < NF; i++) if ($(i + 1) == m) print $i }' "${2:-_output/bench/driver.txt}" |
		sort -g | awk -v m="$1" '{ v[++n] = $1 }
			END { if (n == 0) exit 1; printf "%s median %.3f of %d runs (%.3f-%.3f)", m, (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), n, v[1], v[n] }'
}
echo "NodeGetInfo: $(median_of p99-ratio); $(median_of mean-ratio); $(median_of p99-ratio-workers)" | tee -a _output/bench/driver.txt
go test -run '^$' -bench 'ControllerPublish|PublishLatency' -benchtime "$BENCHTIME" ./bench/driver/ 2>/dev/null | rows | tee -a _output/bench/driver.txt
require _output/bench/driver.txt p99-ratio
require _output/bench/driver.txt p99-ratio-workers
require _output/bench/driver.txt publishes/s
require _output/bench/driver.txt publish-lag-p50-ms
require _output/bench/driver.txt unpublish-lag-p99-ms
echo
echo "== node plugins: our NodeGetInfo vs csi-driver-host-path's (${HOSTPATH_VERSION:-v1.18.0}), each a process on its own unix socket, interleaved from one client: p99-ratio-hostpath is ours-p99-ns / hostpath-p99-ns (target <= 1), mean-ratio-hostpath the same for the means; the median of $NODEINFO_COUNT runs"
section hostpath
# The programs as real processes: ours built from this commit, host-path's from its own source
# (hack/hostpath.sh, once per version); bench/hostpath is a module of its own. BENCH_REQUIRE=1
# makes a missing program fail the run instead of skipping.
# The Go module proxy refuses csi-driver-host-path (403, 2026-12-06) and a machine that reaches
# only the proxy cannot clone it either: then the section says so and the run goes on
# (HOSTPATH_GIT=<a clone of it> runs it; BENCH_REQUIRE_HOSTPATH=1 makes its absence fail).
mkdir -p _output/bench/bin
if HOSTPATH_PLUGIN=$(hack/hostpath.sh 2>_output/bench/hostpath-build.log); then
	go build -trimpath -o _output/bench/bin/ ./cmd/driver ./cmd/fakecloud
	(cd bench/hostpath && BENCH_REQUIRE=1 HOSTPATH_PLUGIN="$HOSTPATH_PLUGIN" DRIVER_BIN="$PWD/../../_output/bench/bin/driver" FAKECLOUD_BIN="$PWD/../../_output/bench/bin/fakecloud" \
		go test -run '^$' -bench . -count "$NODEINFO_COUNT" -benchtime "$BENCHTIME" . 2>/dev/null) | rows | tee -a _output/bench/hostpath.txt
	# Its p99 moves from run to run as the one above does: the median of NODEINFO_COUNT runs, with the range.
	hp() { median_of "$1" _output/bench/hostpath.txt BenchmarkNodeGetInfoVsHostPath; }
	echo "NodeGetInfo vs host-path: $(hp p99-ratio-hostpath); $(hp mean-ratio-hostpath)" | tee -a _output/bench/hostpath.txt
	require _output/bench/hostpath.txt p99-ratio-hostpath
	require _output/bench/hostpath.txt mean-ratio-hostpath
else
	echo "SKIPPED, no comparison with host-path: its plugin could not be built (the module proxy refuses csi-driver-host-path, and HOSTPATH_GIT=${HOSTPATH_GIT:-https://github.com/kubernetes-csi/csi-driver-host-path} could not be cloned; set it to a clone). The build's last lines:" | tee -a _output/bench/hostpath.txt
	tail -n 3 _output/bench/hostpath-build.log | sed 's/^/  /' | tee -a _output/bench/hostpath.txt
	if [[ ${BENCH_REQUIRE_HOSTPATH:-0} == 1 ]]; then exit 1; fi
fi
echo
echo "== memory and size: idle RSS (VmRSS) of the fake cloud and the controller plugin, the pair, started as make run starts them (examples/seed.yaml, durable store), 10 s after both answer; and make build's binaries (targets: the pair <= 40 MB, each binary <= 40 MB)"
section memory
make -s build >/dev/null
mem=$(mktemp -d)
port=$BENCH_CLOUD_PORT
bin/fakecloud --listen="127.0.0.1:$port" --data-dir="$mem/data" --seed=examples/seed.yaml --auth=none >"$mem/fakecloud.log" 2>&1 &
cloud_pid=$!
bin/driver --mode=controller --endpoint="unix://$mem/ctrl.sock" --cloud-url="http://127.0.0.1:$port" >"$mem/driver.log" 2>&1 &
ctrl_pid=$!
stop_pair() { kill "$cloud_pid" "$ctrl_pid" 2>/dev/null || true; wait "$cloud_pid" "$ctrl_pid" 2>/dev/null || true; rm -rf "$mem"; }
trap stop_pair EXIT
for _ in $(seq 1 100); do # up to 10 s for both to be up
	if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && [[ -S $mem/ctrl.sock ]]; then break; fi
	sleep 0.1
done
if ! [[ -S $mem/ctrl.sock ]] || ! kill -0 "$cloud_pid" "$ctrl_pid" 2>/dev/null; then
	echo "bench.sh: the fake cloud or the controller did not start (BENCH_CLOUD_PORT=$port taken?); their logs:" >&2
	tail -n 5 "$mem/fakecloud.log" "$mem/driver.log" >&2
	exit 1
fi
sleep 10
rss() { awk '/^VmRSS:/ { printf "%.2f", $2 / 1024 }' "/proc/$1/status"; }
size() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f", b / 1048576 }'; }
c=$(rss "$cloud_pid") d=$(rss "$ctrl_pid")
echo "idle RSS: fakecloud $c MB + controller $d MB = $(awk -v a="$c" -v b="$d" 'BEGIN { printf "%.2f", a + b }') MB pair-rss-mb; bin/driver $(size bin/driver) MB, bin/fakecloud $(size bin/fakecloud) MB" | tee -a _output/bench/memory.txt
stop_pair
trap - EXIT
echo
echo "== capacity policy: static vs naive vs ours on the same traces (seeded, deterministic)"
section policy
go run ./bench/policy | tee -a _output/bench/policy.txt
echo
echo "== capacity at fleet scale: the policy on $FLEET_NODES simulated nodes, periods 10, 30, 60 s (seeded, deterministic; rows also in _output/bench/fleet.jsonl)"
go run ./bench/policy --fleet --fleet-nodes="$FLEET_NODES" --fleet-duration=30m --fleet-scenarios=steady,quota-cut --fleet-json=_output/bench/fleet.jsonl  # progress on stderr
