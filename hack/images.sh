#!/usr/bin/env bash
# make images: the driver and fake cloud images without a Docker daemon. Each is a static
# binary (CGO off, version and commit stamped) on an empty base, written as an OCI archive
# that `kind load image-archive` (and `docker load`) take:
#   $IMAGES_DIR/driver.tar     localhost/fakecloud-csi/driver:$IMAGE_TAG
#   $IMAGES_DIR/fakecloud.tar  localhost/fakecloud-csi/fakecloud:$IMAGE_TAG
#   $IMAGES_DIR/volumecheck.tar localhost/fakecloud-csi/volumecheck:$IMAGE_TAG (the e2e suite's
#                              S15 workload, tests/e2e/cmd/volumecheck)
# The images carry the version and commit as OCI labels too. The node plugin needs no tools
# in the image: it bind-mounts with mount(2) itself.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

IMAGES_DIR=${IMAGES_DIR:-_output/images}
IMAGE_TAG=${IMAGE_TAG:-dev}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)}
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
# kind nodes run the host's architecture (Docker Desktop on arm64 Macs: linux/arm64).
ARCH=${ARCH:-$(go env GOARCH)}

case "$IMAGES_DIR" in /*) out=$IMAGES_DIR ;; *) out=$root/$IMAGES_DIR ;; esac
mkdir -p "$out/bin"
# -tags=grpcnotrace as the Makefile's GOFLAGS (bin/driver 4.5 MB smaller; see there).
ldflags="-s -w -X github.com/fakecloud/fakecloud-csi/pkg/version.Version=$VERSION -X github.com/fakecloud/fakecloud-csi/pkg/version.Commit=$COMMIT"

# kindctl lives in its own module (hack/kind) so go-containerregistry stays out of go.mod.
kindctl=$out/bin/kindctl
# Through hack/progress.sh (a line every 30 s): on a cold cache these builds take minutes
# (go-containerregistry, then client-go, gRPC and the Prometheus client for the driver).
(cd hack/kind && "$root/hack/progress.sh" "go build kindctl" go build -v -o "$kindctl" ./cmd/kindctl)

for b in driver fakecloud volumecheck; do
  pkg=./cmd/$b dir=.
  [[ $b == volumecheck ]] && pkg=./cmd/volumecheck dir=tests/e2e
  (cd "$dir" && CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH "$root/hack/progress.sh" "go build $b" \
    go build -v -trimpath -tags=grpcnotrace -ldflags "$ldflags" -o "$out/bin/$b" "$pkg")
  "$kindctl" image --binary="$out/bin/$b" --ref="localhost/fakecloud-csi/$b:$IMAGE_TAG" \
    --arch="$ARCH" --version="$VERSION" --commit="$COMMIT" --out="$out/$b.tar"
done
