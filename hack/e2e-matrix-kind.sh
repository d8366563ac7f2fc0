#!/usr/bin/env bash
# make e2e-matrix-kind: the compatibility matrix's cells with real kubelets (docs/compatibility.md),
# on the kind cluster of make e2e, one worker's kubelet swapped between them:
#   1. build the real kubelet of OLD_KUBELET (default v1.34.4) from the Go module proxy, cached
#      by version (bin/localcluster build --version=... --components=kubelet);
#   2. hack/kind-up.sh (OFFLINE=1: every image built here and cached, as make e2e);
#   3. per step of MATRIX_KIND_STEPS (default "newest oldest oldest-gate-on"), on NODE (default
#      the worker of zone-a, 4 slots, beside the control plane in the same zone):
#        newest          the node image's own kubelet (v1.37.2), gate at its default (on);
#        oldest          OLD_KUBELET, gate at its default (off in 1.34);
#        oldest-gate-on  OLD_KUBELET with --feature-gates=MutableCSINodeAllocatableCount=true
#                        (/etc/default/kubelet's KUBELET_EXTRA_ARGS) and the Node labelled
#                        fakecloud.dev/dynamic-capacity=true;
#      the kubelet binary is copied into the node container and restarted under kind's own
#      systemd unit and config (kubeadm v1.37's /var/lib/kubelet/config.yaml: a 1.34 kubelet
#      takes it as it is), the node plugin's pod replaced so that it decides again, then
#      `matrix check` runs the cell checks there, appends the row (cluster "kind") to
#      tests/e2e/matrix/results.json and writes docs/compatibility.md's table from it;
#   4. delete the cluster and stop the dockerd OFFLINE=1 started, unless KEEP_CLUSTER=1.
# Every step runs even when one's outcome is not as expected; the exit status says whether all
# were. Needs what make e2e needs (Docker, or OFFLINE=1 as root).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# The cluster's name and files, CLOUD_URL, OFFLINE, KEEP_CLUSTER, POD_IMAGE, kind_pod_image,
# kind_teardown.
# shellcheck source=hack/lib/kind.sh
source hack/lib/kind.sh
OLD_KUBELET=${OLD_KUBELET:-v1.34.4}
NODE=${NODE:-$KIND_CLUSTER_NAME-worker}
MATRIX_KIND_STEPS=${MATRIX_KIND_STEPS:-newest oldest oldest-gate-on}
LOCALCLUSTER_BIN=${LOCALCLUSTER_BIN:-$root/bin/localcluster}
CLOUD_TOKEN=${CLOUD_TOKEN:-demo-admin-token}
control_plane=$KIND_CLUSTER_NAME-control-plane
gate=MutableCSINodeAllocatableCount

start=$SECONDS
step() { printf '\n== [%ds] %s\n' "$((SECONDS - start))" "$*"; }

workdir=$(mktemp -d)
teardown() {
  rm -rf "$workdir"
  kind_teardown
}
trap teardown EXIT

step "1. the real kubelet $OLD_KUBELET"
old_dir=$(cd tests/e2e && "$LOCALCLUSTER_BIN" build --version="$OLD_KUBELET" --components=kubelet | tee /dev/stderr |
  sed -n 's/^built .* into //p' | tail -1)
old_bin=$old_dir/kubelet
[[ -x $old_bin ]] || { echo "no kubelet $OLD_KUBELET at $old_bin" >&2; exit 1; }
(cd tests/e2e && go build -o "$workdir/matrix" ./cmd/matrix)
printf '%s\n' "$CLOUD_TOKEN" >"$workdir/token"

step "2. kind cluster"
hack/kind-up.sh
kind_pod_image

# kc ARGS...: kubectl of the control plane's node container (the node images carry it).
kc() { docker exec "$control_plane" kubectl --kubeconfig=/etc/kubernetes/admin.conf "$@"; }

# set_kubelet BINARY VERSION EXTRA_ARGS LABEL: run BINARY as NODE's kubelet with EXTRA_ARGS,
# label the Node's mode label LABEL (true) or remove it (""), wait until the Node reports
# VERSION and Ready, then replace the node plugin's pod (it decides again at start) and wait
# until NODE's CSINode lists the driver with a count.
set_kubelet() {
  local bin=$1 version=$2 extra=$3 label=$4
  docker cp "$bin" "$NODE:/usr/bin/kubelet.matrix"
  # The CPU, memory and DRA managers' checkpoints are written in the running kubelet's format;
  # another version may refuse them at start. No pod here pins CPUs or memory or holds a
  # ResourceClaim, so the restarted kubelet starts them afresh, as after a policy change.
  docker exec "$NODE" sh -euc '
    [ -e /usr/bin/kubelet.kind ] || cp /usr/bin/kubelet /usr/bin/kubelet.kind
    systemctl stop kubelet
    install -m 0755 /usr/bin/kubelet.matrix /usr/bin/kubelet
    rm -f /var/lib/kubelet/cpu_manager_state /var/lib/kubelet/memory_manager_state /var/lib/kubelet/dra_manager_state
    printf "KUBELET_EXTRA_ARGS=%s\n" "$1" >/etc/default/kubelet
    systemctl start kubelet' sh "$extra"
  if [[ -n $label ]]; then
    kc label node "$NODE" "fakecloud.dev/dynamic-capacity=$label" --overwrite
  else
    kc label node "$NODE" fakecloud.dev/dynamic-capacity- 2>/dev/null || true
  fi
  if ! kc wait --for=jsonpath='{.status.nodeInfo.kubeletVersion}'="$version" "node/$NODE" --timeout=180s ||
    ! kc wait --for=condition=Ready "node/$NODE" --timeout=180s; then
    docker exec "$NODE" journalctl -u kubelet --no-pager -n 80 >&2 || true
    return 1
  fi
  kc -n fakecloud-csi delete pod -l app.kubernetes.io/name=fakecloud-csi-node --field-selector "spec.nodeName=$NODE" --wait=true
  kc -n fakecloud-csi rollout status daemonset/fakecloud-csi-node --timeout=180s
  for _ in $(seq 1 120); do
    if [[ -n $(kc get csinode "$NODE" -o jsonpath='{.spec.drivers[?(@.name=="disk.fakecloud.dev")].allocatable.count}' 2>/dev/null) ]]; then
      docker exec "$NODE" /usr/bin/kubelet --version
      return 0
    fi
    sleep 1
  done
  echo "CSINode $NODE does not list disk.fakecloud.dev with a count after 2 minutes" >&2
  return 1
}

# The node image's own kubelet, for the newest step after a swap.
kind_bin=$workdir/kubelet.kind
docker cp "$NODE:/usr/bin/kubelet" "$kind_bin"
kind_version=$("$kind_bin" --version | awk '{print $2}')
swapped=0
failed=()
for s in $MATRIX_KIND_STEPS; do
  step "3. $s on $NODE"
  case $s in
    newest) if ((swapped)); then set_kubelet "$kind_bin" "$kind_version" "" ""; fi ;;
    oldest) set_kubelet "$old_bin" "$OLD_KUBELET" "" "" ;;
    oldest-gate-on) set_kubelet "$old_bin" "$OLD_KUBELET" "--feature-gates=$gate=true" true ;;
    *) echo "unknown step $s (newest, oldest, oldest-gate-on)" >&2; exit 2 ;;
  esac
  [[ $s == newest ]] || swapped=1
  if ! (cd tests/e2e && "$workdir/matrix" check --kubeconfig="$KUBECONFIG_FILE" --cloud-url="$CLOUD_URL" \
      --cloud-token-file="$workdir/token" --node="$NODE" --cluster=kind --pod-image="$POD_IMAGE"); then
    failed+=("$s")
  fi
done

step "done"
if ((${#failed[@]})); then
  echo "kind cells not as expected: ${failed[*]} (rows in tests/e2e/matrix/results.json)"
  exit 1
fi
echo "kind cells as expected (rows in tests/e2e/matrix/results.json, table in docs/compatibility.md)"
