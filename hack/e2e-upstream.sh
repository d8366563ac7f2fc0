#!/usr/bin/env bash
# make e2e-upstream: Kubernetes' own storage e2e testsuites (k8s.io/kubernetes
# test/e2e/storage/external at the tools module's v1.37.2) against disk.fakecloud.dev,
# driven by tests/e2e/upstream/testdriver.yaml. docs/e2e-upstream.md has the spec table.
#
#   E2E_UPSTREAM_MODE=local (default): build what is missing (localcluster build,
#     build-upstream), start a local cluster in its own run folder, run the suites that need
#     no container (hollow kubelets run none), write the JUnit report and the summary into the
#     run's logs/, stop the cluster (also on failure; KEEP_CLUSTER=1 keeps it).
#   E2E_UPSTREAM_MODE=kubeconfig: every applicable suite against the cluster of KUBECONFIG
#     (kind with the driver deployed: make kind-up), reports into ARTIFACTS.
#
# E2E_UPSTREAM_TIMEOUT bounds the ginkgo run (default 40m local, 3h kubeconfig);
# E2E_UPSTREAM_ARGS are extra flags for the suite (e.g. -ginkgo.focus='volume-expand').
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mode=${E2E_UPSTREAM_MODE:-local}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
E2E_UPSTREAM_ARGS=${E2E_UPSTREAM_ARGS:-}
localcluster=(go -C "$root/tests/e2e" run ./localcluster/cmd/localcluster)
driver='External Storage \[Driver: disk\.fakecloud\.dev\]'
# The scheduler's preventPodSchedulingIfMissing (KEP-4876's VolumeLimitScaling), which
# deploy/kind/csidriver.yaml sets: CSIDriver objects and pods only, no container. The other CSI
# Mock specs deploy the mock driver's images and test Kubernetes, not this driver.
mock_scaling='CSI Mock VolumeLimitScaling scheduling'

# Specs never run, anywhere, each with its reason. The suites skip what the driver does not
# claim (testdriver.yaml) by themselves; these are what the claims cannot express.
skips=(
  # They restart the kubelet or the node over SSH (e2essh); neither cluster offers SSH.
  '\[Disruptive\]'
  # Performance suites: they need PerformanceTestOptions, which an external driver file
  # cannot set, and measure the machine rather than the driver.
  'volume-lifecycle-performance|pvc-deletion-performance'
)

case $mode in
local)
  timeout=${E2E_UPSTREAM_TIMEOUT:-40m}
  # The suites whose specs need no container: they check API objects, scheduling, attach,
  # stage/publish and the PVC's size and conditions, never a command's output. Everything
  # else (provisioning's data checks, volumes, volumeIO, subPath, multiVolume, volumeMode,
  # fsgroupchangepolicy, ephemeral, snapshottable) runs a command in a pod and waits for it
  # to succeed or execs into it; hollow kubelets never start a container, so those specs
  # would only time out. They run in E2E_UPSTREAM_MODE=kubeconfig. capacity is not claimed
  # (testdriver.yaml).
  focus=("$driver .*\] (volumeLimits|topology|volume-expand|read-write-once-pod) " "$mock_scaling")
  # It waits for the kubelet's FailedMount event; the hollow kubelets send no events.
  skips+=('read-write-once-pod should block a second pod from using an in-use ReadWriteOncePod volume on the same node')
  ;;
kubeconfig)
  : "${KUBECONFIG:?E2E_UPSTREAM_MODE=kubeconfig needs KUBECONFIG (e.g. _output/kind/kubeconfig after make kind-up)}"
  timeout=${E2E_UPSTREAM_TIMEOUT:-3h}
  focus=("$driver" "$mock_scaling")
  ;;
*)
  echo "E2E_UPSTREAM_MODE=$mode: want local or kubeconfig" >&2
  exit 2
  ;;
esac

if [[ $mode == local ]]; then
  "${localcluster[@]}" build
fi
suite=$("${localcluster[@]}" build-upstream)

run_dir=
# shellcheck disable=SC2317 # called by the EXIT trap
teardown() {
  if [[ -n $run_dir ]]; then
    if [[ $KEEP_CLUSTER == 1 ]]; then
      echo "KEEP_CLUSTER=1: the local cluster in $run_dir keeps running; stop it with:"
      echo "  (cd tests/e2e && go run ./localcluster/cmd/localcluster down --run-dir=$run_dir)"
    else
      "${localcluster[@]}" down --run-dir="$run_dir" || true
    fi
  fi
}
trap teardown EXIT

testdriver=$root/tests/e2e/upstream/testdriver.yaml
if [[ $mode == local ]]; then
  run_dir=$(mktemp -d -t fcsi-upstream.XXXXXX)
  # --private: a `make down-local` meant for another cluster must not stop this one.
  "${localcluster[@]}" up --private --run-dir="$run_dir"
  export KUBECONFIG=$run_dir/kubeconfig-admin
  reports=$run_dir/logs
  # The one line in which the local cluster differs: its pods run no containers.
  grep -qx '    exec: true' "$testdriver" || { echo "$testdriver: no '    exec: true' line to turn off" >&2; exit 1; }
  sed 's/^    exec: true$/    exec: false/' "$testdriver" >"$run_dir/testdriver-local.yaml"
  testdriver=$run_dir/testdriver-local.yaml
else
  reports=${ARTIFACTS:-$root/_output/e2e-upstream/$(date +%Y%m%d-%H%M%S)}
fi
mkdir -p "$reports/e2e-upstream"

args=(
  -kubeconfig="$KUBECONFIG"
  -storage.testdriver="$testdriver"
  -report-dir="$reports/e2e-upstream"
  -ginkgo.junit-report="$reports/junit-e2e-upstream.xml"
  -ginkgo.timeout="$timeout"
  -ginkgo.no-color
  -ginkgo.v
  -test.timeout=0
)
for f in "${focus[@]}"; do args+=(-ginkgo.focus="$f"); done
for s in "${skips[@]}"; do args+=(-ginkgo.skip="$s"); done

printf '\n== upstream storage e2e (%s mode), reports in %s\n' "$mode" "$reports"
status=0
# shellcheck disable=SC2086 # E2E_UPSTREAM_ARGS is a list of flags
(cd "$reports/e2e-upstream" && "$suite" "${args[@]}" $E2E_UPSTREAM_ARGS) 2>&1 |
  tee "$reports/e2e-upstream.log" || status=$?
echo "JUnit: $reports/junit-e2e-upstream.xml; summary: $reports/e2e-upstream/summary.txt; log: $reports/e2e-upstream.log"
if [[ -n $run_dir ]]; then
  echo "the cluster's component logs: $run_dir/logs"
fi
exit $status
