#!/usr/bin/env bash
# hack/kind/offline/sidecar-images.sh: the CSI sidecar images of deploy/kind-offline, packed
# from the binaries the local cluster's build compiled from the Go module proxy
# (`localcluster build --kind`, ~/.cache/fakecloud-csi/localcluster/<k8s version>/bin):
#   $IMAGES_DIR/<name>.tar   localhost/fakecloud-csi/<name>:<version>, docker-loadable
# for csi-attacher, csi-provisioner, csi-resizer, csi-snapshotter and snapshot-controller, and
# their names, space-separated, in $IMAGES_DIR/sidecar-images (what hack/kind-up.sh loads).
#
# Each version is the one the binary reports (`<name> --version`, stamped from its module's
# version by the build, and checked against the module version in its Go build info), so no
# version is written here. It must be deploy/kind's tag of the
# same image (for snapshot-controller: of csi-snapshotter, the same release), which
# deploy/kind-offline keeps: a laptop running the official images and this machine run the same
# code, and a mismatch fails here instead of as an image kind cannot find.
#
# An archive is rebuilt only when its binary or reference changed (key in <name>.tar.key).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
# shellcheck source=hack/kind/offline/lib.sh
source "$here/lib.sh"
export GOTOOLCHAIN=local

IMAGES_DIR=${IMAGES_DIR:-$root/_output/images}
case "$IMAGES_DIR" in /*) ;; *) IMAGES_DIR=$root/$IMAGES_DIR ;; esac
ARCH=${ARCH:-$(go env GOARCH)}
SIDECARS=(csi-attacher csi-provisioner csi-resizer csi-snapshotter snapshot-controller)

if [[ -z ${K8S_BIN:-} ]]; then
  # The build's cache folder is keyed by the Kubernetes version the tools module pins.
  k8s_version=$(go -C "$root/tests/e2e/localcluster/tools" list -m -f '{{.Version}}' k8s.io/kubernetes)
  K8S_BIN=$FAKECLOUD_CACHE/localcluster/$k8s_version/bin
fi
mkdir -p "$IMAGES_DIR/bin"

step "sidecar-images: kindctl"
kindctl=$IMAGES_DIR/bin/kindctl
(cd "$root/hack/kind" && go build -o "$kindctl" ./cmd/kindctl)
# deploy/kind's images, one per line, to check each binary's version against.
deploy_images=$("$kindctl" render "$root/deploy/kind" | sed -n 's/^[[:space:]]*image:[[:space:]]*//p' | tr -d "\"'")

# deploy_tag REPO: the tag deploy/kind runs registry.k8s.io/sig-storage/REPO at.
deploy_tag() {
  local tag
  tag=$(grep -m1 "^registry.k8s.io/sig-storage/$1:" <<<"$deploy_images" | sed 's/^[^:]*://; s/@.*//') || true
  [[ -n $tag ]] || die "deploy/kind runs no registry.k8s.io/sig-storage/$1 image"
  echo "$tag"
}

names=()
for name in "${SIDECARS[@]}"; do
  bin=$K8S_BIN/$name
  [[ -x $bin ]] || die "$bin is missing: build it with (cd tests/e2e && go run ./localcluster/cmd/localcluster build --kind)"
  # The Go module the binary was built from, from its build info: "path <package>", and
  # "mod" (built as the main module) or "dep" lines "<module> <version> <sum>"; the module is
  # the one whose path prefixes the package.
  buildinfo=$(go version -m "$bin") || die "$bin has no Go build info"
  pkg=$(awk '$1 == "path" { print $2; exit }' <<<"$buildinfo")
  read -r module modversion modsum < <(awk -v pkg="$pkg" '($1 == "mod" || $1 == "dep") && index(pkg "/", $2 "/") == 1 { print $2, $3, $4; exit }' <<<"$buildinfo") ||
    die "$bin: no module of $pkg in its build info"
  # "<argv0> <version>": every sidecar prints os.Args[0] and main.version.
  version=$("$bin" --version 2>/dev/null | awk 'NR == 1 { print $NF }')
  [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ && $version == "$modversion" ]] ||
    die "$bin --version says '$version', built from $module $modversion: was main.version stamped by the build?"
  repo=$name
  [[ $name == snapshot-controller ]] && repo=csi-snapshotter
  want=$(deploy_tag "$repo")
  [[ $version == "$want" ]] ||
    die "$name $version was built, but deploy/kind runs $repo:$want: pin one release in deploy/kind and tests/e2e/localcluster/tools/go.mod"

  ref=localhost/fakecloud-csi/$name:$version
  out=$IMAGES_DIR/$name.tar
  key=$( { echo "$ref $ARCH"; sha256sum <"$bin"; } | sha256sum | cut -c1-16)
  if [[ -f $out && -f $out.key && $(cat "$out.key") == "$key" ]]; then
    echo "$name: $ref (cached, $out)"
  else
    step "sidecar-images: $ref"
    rm -f "$out.key"
    # The module proxy gives no commit: the revision label is the module's Go checksum,
    # which names the source as exactly.
    "$kindctl" image --format=docker --binary="$bin" --ref="$ref" --arch="$ARCH" \
      --version="$version" --commit="$modsum" --source="https://${module%/v[0-9]*}" --out="$out"
    echo "$key" >"$out.key"
  fi
  names+=("$name")
done
echo "${names[*]}" >"$IMAGES_DIR/sidecar-images"
echo "sidecar-images: ${names[*]} in $IMAGES_DIR (${SECONDS}s)"
