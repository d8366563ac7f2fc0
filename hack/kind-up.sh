#!/usr/bin/env bash
# make kind-up: a kind cluster with the driver, the fake cloud and the sidecars. Two ways:
#
#   default     a laptop with Docker (or Podman) and Go: kind's official node image, the
#               official sidecar images from registry.k8s.io; kind is pinned in tools/go.mod,
#               kubectl is not needed.
#   OFFLINE=1   a machine that reaches no container registry (CI, a VM with only the Go module
#               proxy and Debian's archive): every image is built here and cached by version
#               under ~/.cache/fakecloud-csi (hack/kind/offline/), a Docker engine is started
#               when none runs (hack/kind/offline/dockerd.sh; hack/kind-down.sh stops it), and
#               deploy/kind-offline replaces the official sidecars with the ones built here.
#
# Steps:
#   1. build the driver, fake cloud and e2e workload images (hack/images.sh, no Docker daemon);
#      OFFLINE=1 also: the Debian packages, dockerd, the Kubernetes binaries, the node image and
#      the sidecar images (make kind-images);
#   2. create the kind cluster of deploy/kind/kind-config.yaml (skipped if it exists);
#      OFFLINE=1: of the config kindctl derives from it for the offline node image;
#   3. load the image archives into every node (OFFLINE=1: the sidecars and the upstream
#      storage e2e's test images too; $KIND_DIR/e2e-repo-list.yaml then names those for
#      make e2e-upstream E2E_UPSTREAM_MODE=kubeconfig);
#   4. fetch the external-snapshotter release matching the csi-snapshotter sidecar;
#   5. apply deploy/kind/snapshot (CRDs, snapshot-controller), then deploy/kind (or their
#      offline overlays);
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
OFFLINE=${OFFLINE:-0}
kind=(go tool -modfile="$root/tools/go.mod" kind)
kindctl=$IMAGES_DIR/bin/kindctl

start=$SECONDS
step() { printf '\n== [%ds] %s\n' "$((SECONDS - start))" "$*"; }

provider=${KIND_EXPERIMENTAL_PROVIDER:-docker}
if [[ $OFFLINE == 1 ]]; then
  step "0. offline: Debian packages and a Docker engine"
  hack/kind/offline/install-deps.sh
  hack/kind/offline/dockerd.sh start
fi
# kind runs its nodes as containers: fail before building anything when there is no engine.
if ! "$provider" info >/dev/null 2>&1; then
  echo "kind needs a running container engine, and \`$provider info\` failed." >&2
  echo "On a machine without registry access, OFFLINE=1 starts Debian's dockerd itself (as root)." >&2
  echo "Without Docker, \`make e2e-local\` runs the same suite on a local cluster of upstream binaries." >&2
  exit 1
fi

step "1. images"
IMAGES_DIR=$IMAGES_DIR hack/images.sh
archives=(driver fakecloud volumecheck)
config=deploy/kind/kind-config.yaml
deploy=deploy/kind
snapshot=deploy/kind/snapshot
if [[ $OFFLINE == 1 ]]; then
  IMAGES_DIR=$IMAGES_DIR hack/kind/offline/kind-images.sh
  node_image=$(cat "$IMAGES_DIR/kind-node-image")
  # shellcheck source=/dev/null # written by kind-images.sh: ETCD_TAG, POD_IMAGE
  source "$IMAGES_DIR/kind-node-image.env"
  config=$KIND_DIR/kind-config.offline.yaml
  mkdir -p "$KIND_DIR"
  "$kindctl" kind-config --node-image="$node_image" --etcd-tag="$ETCD_TAG" \
    --in=deploy/kind/kind-config.yaml --out="$config"
  read -r -a sidecars <"$IMAGES_DIR/sidecar-images"
  read -r -a e2e_images <"$IMAGES_DIR/e2e-test-images"
  archives+=("${sidecars[@]}" "${e2e_images[@]}")
  deploy=deploy/kind-offline
  snapshot=deploy/kind-offline/snapshot
fi

step "2. kind cluster $KIND_CLUSTER_NAME ($config)"
mkdir -p "$KIND_DIR"
if "${kind[@]}" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
  echo "cluster $KIND_CLUSTER_NAME exists; reusing it"
  "${kind[@]}" export kubeconfig --name "$KIND_CLUSTER_NAME" --kubeconfig "$KUBECONFIG_FILE"
else
  "${kind[@]}" create cluster --name "$KIND_CLUSTER_NAME" --config "$config" \
    --kubeconfig "$KUBECONFIG_FILE" --wait 180s
fi

step "3. load images (${archives[*]})"
for b in "${archives[@]}"; do
  "${kind[@]}" load image-archive "$IMAGES_DIR/$b.tar" --name "$KIND_CLUSTER_NAME"
done
# The upstream e2e's images under their local names are in the cluster now (OFFLINE=1); without
# it the cluster pulls upstream's from registry.k8s.io, and no repo list may redirect them.
rm -f "$KIND_DIR/e2e-repo-list.yaml"
if [[ $OFFLINE == 1 ]]; then
  cp "$IMAGES_DIR/e2e-repo-list.yaml" "$KIND_DIR/e2e-repo-list.yaml"
fi

step "4. external-snapshotter release"
"$kindctl" snapshotter --deploy deploy/kind --out _output/external-snapshotter

step "5. apply $snapshot $deploy"
"$kindctl" apply --kubeconfig "$KUBECONFIG_FILE" "$snapshot" "$deploy"

step "6. wait for rollout"
"$kindctl" wait --kubeconfig "$KUBECONFIG_FILE" --timeout 5m "$snapshot" "$deploy"
"$kindctl" get --timeout 60s --out /dev/null "$CLOUD_URL/readyz"

cat <<MSG

kind cluster $KIND_CLUSTER_NAME is up (in $((SECONDS - start))s).
  export KUBECONFIG=$KUBECONFIG_FILE
  curl -H 'Authorization: Bearer demo-reader-token' $CLOUD_URL/v1/instances
  curl -H 'Authorization: Bearer demo-admin-token' $CLOUD_URL/v1/events
make kind-down removes it$([[ $OFFLINE == 1 ]] && echo " (and stops the dockerd that OFFLINE=1 started)").
MSG
