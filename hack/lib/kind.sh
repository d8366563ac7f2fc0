# shellcheck shell=bash
# Sourced by hack/e2e-kind.sh and hack/e2e-matrix-kind.sh (with $root the clone): the kind
# cluster of make kind-up, where its files go, the fake cloud's URL from the host (deploy/kind's
# NodePort 30080) and the pod image of workloads that only hold volumes; exported for
# hack/kind-up.sh and hack/kind-down.sh, which default to the same.
export KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-fakecloud-csi}
export KIND_DIR=${KIND_DIR:-$root/_output/kind}
export KUBECONFIG_FILE=${KUBECONFIG_FILE:-$KIND_DIR/kubeconfig}
export IMAGES_DIR=${IMAGES_DIR:-$root/_output/images}
export CLOUD_URL=${CLOUD_URL:-http://127.0.0.1:30080}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
export OFFLINE=${OFFLINE:-0}
# The node image's sandbox image serves (kind v0.33.0's containerd config names pause:3.10; the
# offline node image's is in its own file, kind_pod_image reads it after hack/kind-up.sh).
POD_IMAGE=${POD_IMAGE:-registry.k8s.io/pause:3.10}
# shellcheck disable=SC2034 # used by the scripts that source this
kind=(go tool -modfile="$root/tools/go.mod" kind)

# kind_pod_image sets POD_IMAGE to the offline node image's sandbox image (OFFLINE=1).
kind_pod_image() {
  if [[ $OFFLINE == 1 ]]; then
    POD_IMAGE=$(sed -n 's/^POD_IMAGE=//p' "$IMAGES_DIR/kind-node-image.env")
  fi
}

# kind_teardown deletes the cluster and stops the dockerd OFFLINE=1 started (hack/kind-down.sh),
# unless KEEP_CLUSTER=1.
kind_teardown() {
  if [[ "$KEEP_CLUSTER" == 1 ]]; then
    echo "KEEP_CLUSTER=1: cluster $KIND_CLUSTER_NAME kept (KUBECONFIG=$KUBECONFIG_FILE); make kind-down removes it"
  else
    hack/kind-down.sh || true
  fi
}
