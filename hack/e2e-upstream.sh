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
#     E2E_UPSTREAM_SET=ci runs the bounded selection CI runs (every suite at least once, block
#     included) instead of every spec. The pods' images: KUBE_TEST_REPO_LIST if set, else
#     $KIND_DIR/e2e-repo-list.yaml when OFFLINE=1 make kind-up wrote it (the images built
#     here, loaded into kind), else upstream's registry.k8s.io ones.
#
# E2E_UPSTREAM_FOCUS (kubeconfig mode) replaces the set's focus with one regex.
# E2E_UPSTREAM_PROCS runs the specs in that many ginkgo processes (the ginkgo CLI, a go tool
# of tests/e2e/upstream; [Serial] specs run alone at the end); 1 runs the binary directly.
# E2E_UPSTREAM_TIMEOUT bounds the ginkgo run (default 40m local, 3h kubeconfig);
# E2E_UPSTREAM_ARGS are extra flags for the suite (e.g. -ginkgo.focus='volume-expand'; with
# E2E_UPSTREAM_PROCS > 1 they go to the ginkgo CLI, e.g. --focus='volume-expand').
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mode=${E2E_UPSTREAM_MODE:-local}
set_=${E2E_UPSTREAM_SET:-all}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
E2E_UPSTREAM_ARGS=${E2E_UPSTREAM_ARGS:-}
localcluster=(go -C "$root/tests/e2e" run ./localcluster/cmd/localcluster)
driver='External Storage \[Driver: disk\.fakecloud\.dev\]'
# The scheduler's preventPodSchedulingIfMissing (KEP-4876's VolumeLimitScaling), which
# deploy/base/csidriver.yaml sets: CSIDriver objects and pods only, no container. The other CSI
# Mock specs deploy the mock driver's images and test Kubernetes, not this driver.
mock_scaling='CSI Mock VolumeLimitScaling scheduling'
# The suites whose specs need no container: they check API objects, scheduling, attach,
# stage/publish and the PVC's size and conditions, never a command's output.
no_container="$driver .*\] (volumeLimits|topology|volume-expand|read-write-once-pod) "

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
  focus=("$no_container" "$mock_scaling")
  # It waits for the kubelet's FailedMount event; the hollow kubelets send no events.
  skips+=('read-write-once-pod should block a second pod from using an in-use ReadWriteOncePod volume on the same node')
  ;;
kubeconfig)
  : "${KUBECONFIG:?E2E_UPSTREAM_MODE=kubeconfig needs KUBECONFIG (e.g. _output/kind/kubeconfig after make kind-up)}"
  timeout=${E2E_UPSTREAM_TIMEOUT:-3h}
  case $set_ in
  all) focus=("$driver" "$mock_scaling") ;;
  ci)
    # CI's bounded selection on kind: everything the local mode runs (so that CI needs no
    # local run of these suites), then one spec or two of every other suite, block mode where
    # the suite has it, each regex matching one spec (docs/e2e-upstream.md has the table and
    # the time). Chosen for what each suite checks that the others do not, and short.
    d="$driver \\[Testpattern: "
    focus=(
      "$no_container"
      "${d}Dynamic PV \\(default fs\\)\\] provisioning should provision storage with pvc data source\$"
      "${d}Dynamic PV \\(block volmode\\)\\] provisioning should provision storage with snapshot data source \\["
      "${d}Dynamic Snapshot \\(delete policy\\)\\] snapshottable .* should check snapshot fields, check restore correctly works after modifying source data, check deletion \\(persistent\\)"
      "${d}Dynamic PV \\(block volmode\\)\\] volumes should store data"
      "${d}Dynamic PV \\(default fs\\)\\] volumes should allow exec of files on the volume"
      "${d}Dynamic PV \\(default fs\\)\\] volumeIO should write files of various sizes"
      "${d}Dynamic PV \\(default fs\\)\\] subPath should support existing directory\$"
      "${d}Dynamic PV \\(block volmode\\)\\] multiVolume should concurrently access the single volume from pods on the same node"
      "${d}Dynamic PV \\(block volmode\\)\\] volumeMode should not mount / map unused volumes in a pod"
      "${d}Dynamic PV \\(default fs\\)\\] fsgroupchangepolicy \\(OnRootMismatch\\)\\[LinuxOnly\\], pod created with an initial fsgroup, new pod fsgroup applied to volume contents"
      "${d}Generic Ephemeral-volume \\(block volmode\\) \\(late-binding\\)\\] ephemeral should create read/write inline ephemeral volume"
      "$mock_scaling"
    )
    ;;
  *)
    echo "E2E_UPSTREAM_SET=$set_: want all or ci" >&2
    exit 2
    ;;
  esac
  # A focus of one's own instead of the set's (a regex, e.g. to rerun what failed).
  if [[ -n ${E2E_UPSTREAM_FOCUS:-} ]]; then
    focus=("$E2E_UPSTREAM_FOCUS")
  fi
  if [[ -z ${KUBE_TEST_REPO_LIST:-} && -f ${KIND_DIR:-$root/_output/kind}/e2e-repo-list.yaml ]]; then
    export KUBE_TEST_REPO_LIST=${KIND_DIR:-$root/_output/kind}/e2e-repo-list.yaml
    # It deploys a volume populator (registry.k8s.io/sig-storage/hello-populator and
    # volume-data-source-validator, named in upstream's manifests, not through the repo list):
    # images the offline build does not make, so its pods could never start. It tests
    # Kubernetes' populator machinery on a PVC of this driver.
    skips+=('provisioning should provision storage with any volume data source')
  fi
  echo "the pods' images: KUBE_TEST_REPO_LIST=${KUBE_TEST_REPO_LIST:-} (empty: upstream's, registry.k8s.io)"
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

procs=${E2E_UPSTREAM_PROCS:-1}
[[ $procs =~ ^[1-9][0-9]?$ ]] || { echo "E2E_UPSTREAM_PROCS=$procs: want 1-99" >&2; exit 2; }
# The suite's own flags, then ginkgo's: -ginkgo.X to the binary, or --X to the ginkgo CLI, which
# starts $procs copies of the binary and merges their reports.
args=(
  -kubeconfig="$KUBECONFIG"
  -storage.testdriver="$testdriver"
  -report-dir="$reports/e2e-upstream"
  -test.timeout=0
)
gflags=(timeout="$timeout" no-color v)
for f in "${focus[@]}"; do gflags+=(focus="$f"); done
for s in "${skips[@]}"; do gflags+=(skip="$s"); done
if ((procs == 1)); then
  cmd=("$suite" "${args[@]}" -ginkgo.junit-report="$reports/junit-e2e-upstream.xml")
  for g in "${gflags[@]}"; do cmd+=(-ginkgo."$g"); done
  # shellcheck disable=SC2206 # E2E_UPSTREAM_ARGS is a list of flags
  cmd+=($E2E_UPSTREAM_ARGS)
else
  # go tool -n builds the tool (cached by the go command) and prints its path.
  ginkgo=$(go -C "$root/tests/e2e/upstream" tool -n ginkgo)
  # The CLI puts a report named by a path into the suite binary's folder: name the folder.
  cmd=("$ginkgo" run --procs="$procs" --output-dir="$reports" --junit-report=junit-e2e-upstream.xml)
  for g in "${gflags[@]}"; do cmd+=(--"$g"); done
  # shellcheck disable=SC2206 # E2E_UPSTREAM_ARGS is a list of flags
  cmd+=($E2E_UPSTREAM_ARGS "$suite" -- "${args[@]}")
fi

printf '\n== upstream storage e2e (%s mode, %s, %d ginkgo processes), reports in %s\n' "$mode" "$set_" "$procs" "$reports"
status=0
start=$SECONDS
(cd "$reports/e2e-upstream" && "${cmd[@]}") 2>&1 | tee "$reports/e2e-upstream.log" || status=$?
echo "upstream storage e2e: $((SECONDS - start))s"
echo "JUnit: $reports/junit-e2e-upstream.xml; summary: $reports/e2e-upstream/summary.txt; log: $reports/e2e-upstream.log"
if [[ -n $run_dir ]]; then
  echo "the cluster's component logs: $run_dir/logs"
fi
exit $status
