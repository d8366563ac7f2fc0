#!/usr/bin/env bash
# make kind-up: a kind cluster with the driver, the fake cloud and the official sidecars.
# Needs Docker and Go only (kind is pinned in tools/go.mod; kubectl is not needed). Steps:
#   1. build the driver and fake cloud images (hack/images.sh, no Docker daemon involved);
#   2. create the kind cluster of deploy/kind/kind-config.yaml (skipped if it exists);
#   3. load both image archives into every node;
#   4. fetch the external-snapshotter release matching the csi-snapshotter sidecar;
#   5. apply deploy/kind/snapshot (CRDs, snapshot-controller), then deploy/kind;
#   6. wait for every Deployment and DaemonSet to roll out and the fake cloud to answer on
#      localhost:30080.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-fakecloud-csi}
KIND_DIR=${KIND_DIR:-$root/_output/kind}
KUBECONFIG_FILE=${KUBECONFIG_FILE:-$KIND_DIR/kubeconfig}
IMAGES_DIR=${IMAGES_DIR:-$root/_output/images}
CLOUD_URL=${CLOUD_URL:-http://127.0.0.1:30080}
kind=(go tool -modfile="$root/tools/go.mod" kind)
kindctl=$IMAGES_DIR/bin/kindctl

step() { printf '\n== %s\n' "$*"; }

# kind runs its nodes as containers: fail before building anything when there is no engine.
provider=${KIND_EXPERIMENTAL_PROVIDER:-docker}
if ! "$provider" info >/dev/null 2>&1; then
  echo "kind needs a running container engine, and \`$provider info\` failed." >&2
  echo "Without Docker, \`make e2e-local\` runs the same suite on a local cluster of upstream binaries." >&2
  exit 1
fi

step "1. images (no Docker daemon)"
IMAGES_DIR=$IMAGES_DIR hack/images.sh

step "2. kind cluster $KIND_CLUSTER_NAME"
mkdir -p "$KIND_DIR"
if "${kind[@]}" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
  echo "cluster $KIND_CLUSTER_NAME exists; reusing it"
  "${kind[@]}" export kubeconfig --name "$KIND_CLUSTER_NAME" --kubeconfig "$KUBECONFIG_FILE"
else
  "${kind[@]}" create cluster --name "$KIND_CLUSTER_NAME" --config deploy/kind/kind-config.yaml \
    --kubeconfig "$KUBECONFIG_FILE" --wait 180s
fi

step "3. load images"
for b in driver fakecloud; do
  "${kind[@]}" load image-archive "$IMAGES_DIR/$b.tar" --name "$KIND_CLUSTER_NAME"
done

step "4. external-snapshotter release"
"$kindctl" snapshotter --deploy deploy/kind --out _output/external-snapshotter

step "5. apply"
"$kindctl" apply --kubeconfig "$KUBECONFIG_FILE" deploy/kind/snapshot deploy/kind

step "6. wait for rollout"
"$kindctl" wait --kubeconfig "$KUBECONFIG_FILE" --timeout 5m deploy/kind/snapshot deploy/kind
"$kindctl" get --timeout 60s --out /dev/null "$CLOUD_URL/readyz"

cat <<MSG

kind cluster $KIND_CLUSTER_NAME is up.
  export KUBECONFIG=$KUBECONFIG_FILE
  curl -H 'Authorization: Bearer demo-reader-token' $CLOUD_URL/v1/instances
  curl -H 'Authorization: Bearer demo-admin-token' $CLOUD_URL/v1/events
make kind-down removes it.
MSG
