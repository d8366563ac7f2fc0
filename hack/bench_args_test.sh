#!/usr/bin/env bash
# hack/bench_args_test.sh: make bench's and hack/hostpath.sh's settings are refused, with exit
# code 2 and a message naming them, before anything is built or started (make test-all runs it).
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
check() { # WANT ENV=VALUE SCRIPT: SCRIPT with ENV=VALUE exits 2 and says WANT
	local want=$1 env=$2 script=$3 out rc
	out=$(env "$env" "$script" 2>&1 </dev/null)
	rc=$?
	if ((rc != 2)) || [[ $out != *"$want"* ]]; then
		echo "FAIL: $env $script: exit $rc, output: $out (want exit 2 and \"$want\")"; fail=1
	fi
}
check "NODEINFO_COUNT must be a number of runs in 1..50, got '0'" NODEINFO_COUNT=0 hack/bench.sh
check "NODEINFO_COUNT must be a number of runs in 1..50, got '51'" NODEINFO_COUNT=51 hack/bench.sh
check "NODEINFO_COUNT must be a number of runs in 1..50, got '5;x'" 'NODEINFO_COUNT=5;x' hack/bench.sh
check "BENCH_CLOUD_PORT must be a port in 1024..65535, got '80'" BENCH_CLOUD_PORT=80 hack/bench.sh
check "BENCH_CLOUD_PORT must be a port in 1024..65535, got '70000'" BENCH_CLOUD_PORT=70000 hack/bench.sh
check "HOSTPATH_VERSION must be a release tag like v1.18.0, got '../v1.18.0'" HOSTPATH_VERSION=../v1.18.0 hack/hostpath.sh
if ((fail == 0)); then echo "hack/bench_args_test.sh: ok (6 refused settings)"; fi
exit $fail
