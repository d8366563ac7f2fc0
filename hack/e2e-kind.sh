#!/usr/bin/env bash
# make e2e: the e2e suite (tests/e2e) against a kind cluster: real kubelets, real containers.
# Needs Docker and Go; OFFLINE=1 builds every image here instead (see hack/kind-up.sh).
#   1-6. hack/kind-up.sh (images, cluster, load, snapshot release, apply, rollout);
#   7.   go test in tests/e2e with the kubeconfig kind wrote and the fake cloud on
#        localhost:30080 (the kind port mapping), admin token from the demo tokens;
#   8.   E2E_UPSTREAM=ci (or all): Kubernetes' storage e2e testsuites on the same cluster
#        (hack/e2e-upstream.sh E2E_UPSTREAM_MODE=kubeconfig E2E_UPSTREAM_SET=$E2E_UPSTREAM, in
#        E2E_UPSTREAM_PROCS ginkgo processes, default 4), JUnit and summary into ARTIFACTS;
#        unset: skipped;
#   9.   on failure: kind's logs (every node, every container, every pod's log under each
#        node's /var/log/pods) and the fake cloud's /v1/events into a folder it prints;
#   10.  delete the cluster and stop the dockerd OFFLINE=1 started, unless KEEP_CLUSTER=1.
# E2E_ARGS are passed to go test (e.g. E2E_ARGS='-run TestS01').
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# The cluster's name and files, CLOUD_URL, OFFLINE, KEEP_CLUSTER, POD_IMAGE (the scenarios' pods
# only hold volumes), kind, kind_pod_image, kind_teardown.
# shellcheck source=hack/lib/kind.sh
source hack/lib/kind.sh
E2E_ARGS=${E2E_ARGS:-}
E2E_UPSTREAM=${E2E_UPSTREAM:-}
ARTIFACTS=${ARTIFACTS:-$KIND_DIR/artifacts-$(date +%Y%m%d-%H%M%S)}

collect() {
  mkdir -p "$ARTIFACTS"
  "${kind[@]}" export logs "$ARTIFACTS/kind" --name "$KIND_CLUSTER_NAME" || true
  "$IMAGES_DIR/bin/kindctl" get --token demo-admin-token --out "$ARTIFACTS/fakecloud-events.json" \
    "$CLOUD_URL/v1/events" || true
  echo "e2e on kind FAILED; kind logs and the fake cloud's /v1/events are in $ARTIFACTS"
}

trap kind_teardown EXIT
if ! hack/kind-up.sh; then
  collect
  exit 1
fi
kind_pod_image

printf '\n== 7. e2e suite\n'
mkdir -p "$ARTIFACTS"
# The driver on kind runs the local cluster's capacity flags (deploy/kind/node-daemonset-patch.yaml),
# so the suite's defaults for -rise-allowance and -stale-after hold.
# shellcheck disable=SC2086 # E2E_ARGS is a list of go test flags
if ! (cd tests/e2e && go test -count=1 -timeout=40m -v . \
      -kubeconfig="$KUBECONFIG_FILE" -cloud-url="$CLOUD_URL" -cloud-token=demo-admin-token \
      -log-dir="$ARTIFACTS" -pod-image="$POD_IMAGE" \
      -volumecheck-image=localhost/fakecloud-csi/volumecheck:"${IMAGE_TAG:-dev}" $E2E_ARGS); then
  collect
  exit 1
fi
echo "e2e on kind passed"

if [[ -n $E2E_UPSTREAM ]]; then
  printf '\n== 8. upstream storage e2e (%s) on the same cluster\n' "$E2E_UPSTREAM"
  # OFFLINE=1 loaded the suite's images under local names; kind-up wrote their repo list.
  # 4 processes: the specs mostly wait for attach, mounts and pods, not for the CPU
  # (docs/e2e-upstream.md has the measurements).
  if ! E2E_UPSTREAM_MODE=kubeconfig E2E_UPSTREAM_SET=$E2E_UPSTREAM KUBECONFIG=$KUBECONFIG_FILE \
      E2E_UPSTREAM_PROCS=${E2E_UPSTREAM_PROCS:-4} ARTIFACTS=$ARTIFACTS hack/e2e-upstream.sh; then
    collect
    exit 1
  fi
  echo "upstream storage e2e on kind passed (JUnit: $ARTIFACTS/junit-e2e-upstream.xml)"
fi
