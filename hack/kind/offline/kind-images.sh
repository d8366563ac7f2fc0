#!/usr/bin/env bash
# make kind-images: every image an offline kind cluster needs, built from Debian's packages and
# the Go module proxy only, each cached by version under ~/.cache/fakecloud-csi:
#   1. the Kubernetes v1.37.2 binaries and the sidecars (the local cluster's build, one `go build`,
#      shared Go build cache): `localcluster build --kind`;
#   2. the kind node image (hack/kind/offline/node-image.sh), loaded into the Docker engine; its
#      ref goes to $IMAGES_DIR/kind-node-image, what a cluster on it needs (ETCD_TAG, POD_IMAGE)
#      to $IMAGES_DIR/kind-node-image.env; then what older keys left in ~/.cache/fakecloud-csi/kind
#      and the engine goes (hack/kind/offline/prune-cache.sh, which says what and how much);
#   3. the sidecar images (hack/kind/offline/sidecar-images.sh) as archives in $IMAGES_DIR; their
#      names go to $IMAGES_DIR/sidecar-images;
#   4. the upstream storage e2e's test images (hack/kind/offline/e2e-test-images.sh: busybox,
#      agnhost and two stand-ins) as archives in $IMAGES_DIR, names in $IMAGES_DIR/e2e-test-images,
#      the suite's KUBE_TEST_REPO_LIST in $IMAGES_DIR/e2e-repo-list.yaml.
# Needs a running Docker engine for step 2 (hack/kind/offline/dockerd.sh start).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
# shellcheck source=hack/kind/offline/lib.sh
source "$here/lib.sh"
IMAGES_DIR=${IMAGES_DIR:-$root/_output/images}
export IMAGES_DIR
mkdir -p "$IMAGES_DIR"

step "kind-images 1/4: Kubernetes binaries, sidecars and agnhost (v1.37.2; cold: 30-45 min on 2 cores)"
# The tool built to bin/ through hack/progress.sh (as make localcluster does), not `go run`: a
# cold cache compiles client-go for it first, minutes that `go run` would spend silently.
(cd "$root/tests/e2e" && "$root/hack/progress.sh" "go build bin/localcluster" \
  go build -v -o "$root/bin/localcluster" ./localcluster/cmd/localcluster)
(cd "$root/tests/e2e" && "$root/bin/localcluster" build --kind)

step "kind-images 2/4: kind node image"
"$here/node-image.sh" | tee "$IMAGES_DIR/node-image.log"
tail -n 1 "$IMAGES_DIR/node-image.log" >"$IMAGES_DIR/kind-node-image"
cp "$FAKECLOUD_CACHE/kind/node-image.env" "$IMAGES_DIR/kind-node-image.env"
echo "node image: $(cat "$IMAGES_DIR/kind-node-image") ($(tr '\n' ' ' <"$IMAGES_DIR/kind-node-image.env"))"

step "kind-images 3/4: sidecar images"
"$here/sidecar-images.sh"

step "kind-images 4/4: the upstream storage e2e's test images"
"$here/e2e-test-images.sh"
echo "kind-images: done in ${SECONDS}s"
