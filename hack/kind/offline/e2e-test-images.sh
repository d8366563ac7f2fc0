#!/usr/bin/env bash
# hack/kind/offline/e2e-test-images.sh: the images the upstream storage e2e (tests/e2e/upstream,
# k8s.io/kubernetes test/e2e/storage at the tools module's version) runs its pods with, built
# here without a registry, under a local name so that nobody mistakes them for upstream's:
#   $IMAGES_DIR/e2e-<name>.tar   localhost/fakecloud-csi/e2e-test-images/<name>:<upstream tag>
#   $IMAGES_DIR/e2e-test-images  the archive names, space-separated (what hack/kind-up.sh loads)
#   $IMAGES_DIR/e2e-repo-list.yaml  the KUBE_TEST_REPO_LIST that points the suite's
#                                promoterE2eRegistry at them (hack/e2e-upstream.sh sets it)
# The tags are upstream's, read from test/utils/image/manifest.go of the pinned release, so no
# version is written here:
#   busybox            the default test image: Debian's busybox-static of the same upstream
#                      version (1.37.0 is in trixie; bookworm has 1.35.0), /bin/busybox and a
#                      link per applet, /etc/passwd and /etc/group, /tmp; CMD ["sh"] as Docker's
#   agnhost            agnhost built from the same release (`localcluster build --kind`, version
#                      stamped from its VERSION, checked against the tag) on that busybox root
#                      instead of upstream's alpine: subPath runs `agnhost mounttest` and /bin/sh
#   nginx              STAND-IN: the busybox image under its name; the volumes suite's exec spec
#                      only runs /bin/sh in it
#   glibc-dns-testing  STAND-IN: upstream's is Debian bookworm-slim with dnsutils; the multiVolume
#                      pods run sh and GNU dd (oflag=nocache, which busybox's dd lacks) in it, so
#                      it is the busybox root plus Debian $GLIBC_SUITE's glibc (libc6), GNU dd
#                      (from coreutils) and dash as /bin/sh, as Debian has it (busybox's own sh
#                      runs its dd applet whatever PATH says: Debian's busybox-static prefers
#                      applets)
# Each archive is built only when its inputs change, cached by them under
# $FAKECLOUD_CACHE/e2e-test-images/archives and copied from there; the Debian packages are
# downloaded once per version into $FAKECLOUD_CACHE/e2e-test-images.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
# shellcheck source=hack/kind/offline/lib.sh
source "$here/lib.sh"
export GOTOOLCHAIN=local

IMAGES_DIR=${IMAGES_DIR:-$root/_output/images}
case "$IMAGES_DIR" in /*) ;; *) IMAGES_DIR=$root/$IMAGES_DIR ;; esac
ARCH=${ARCH:-$(go env GOARCH)}
REGISTRY=localhost/fakecloud-csi/e2e-test-images
# The Debian release whose busybox-static is the upstream busybox image's version.
BUSYBOX_SUITE=${BUSYBOX_SUITE:-trixie}
# The Debian release of upstream's glibc-dns-testing base (its BASEIMAGE, debian:bookworm-slim).
GLIBC_SUITE=${GLIBC_SUITE:-bookworm}
tools=$root/tests/e2e/localcluster/tools
k8s_version=$(go -C "$tools" list -m -f '{{.Version}}' k8s.io/kubernetes)
k8s_src=$(go -C "$tools" list -m -f '{{.Dir}}' k8s.io/kubernetes)
K8S_BIN=${K8S_BIN:-$FAKECLOUD_CACHE/localcluster/$k8s_version/bin}
cache=$FAKECLOUD_CACHE/e2e-test-images
mkdir -p "$IMAGES_DIR/bin" "$cache"

# upstream_tag ID NAME: the tag manifest.go gives image ID (configs[ID] = Config{..., "NAME", "TAG"}).
upstream_tag() {
  local tag
  tag=$(sed -n "s/^[[:space:]]*configs\[$1\] = Config{list\.PromoterE2eRegistry, \"$2\", \"\([^\"]*\)\"}.*/\1/p" \
    "$k8s_src/test/utils/image/manifest.go")
  [[ -n $tag ]] || die "no $1 ($2) image in $k8s_src/test/utils/image/manifest.go"
  echo "$tag"
}
busybox_tag=$(upstream_tag BusyBox busybox)
agnhost_tag=$(upstream_tag Agnhost agnhost)
nginx_tag=$(upstream_tag Nginx nginx)
glibc_tag=$(upstream_tag GlibcDnsTesting glibc-dns-testing)
# 1.37.0-2 is the image's second build of busybox 1.37.0.
busybox_version=${busybox_tag%-*}

step "e2e-test-images: kindctl"
kindctl=$IMAGES_DIR/bin/kindctl
(cd "$root/hack/kind" && go build -o "$kindctl" ./cmd/kindctl)

# apt_download SUITE DIR PKG...: Debian SUITE's packages PKG... (their .deb files) into DIR,
# through apt with its own source list and state under $cache/apt-SUITE (the host's apt
# configuration is not touched; apt checks the archive's signature as always).
apt_download() {
  local suite=$1 dir=$2 apt=$cache/apt-$1
  shift 2
  mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$dir"
  echo "deb http://deb.debian.org/debian $suite main" >"$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "APT::Architectures::=$ARCH")
  echo "  apt-get update ($suite only, state in $apt)" >&2
  apt-get -q "${opts[@]}" update >"$apt/update.log" 2>&1 || { tail -n 20 "$apt/update.log" >&2; die "apt-get update for $suite failed (log $apt/update.log)"; }
  local p pkgs=()
  for p in "$@"; do pkgs+=("$p:$ARCH"); done
  (cd "$dir" && apt-get -q "${opts[@]}" download "${pkgs[@]}" >"$apt/download.log" 2>&1) ||
    { tail -n 20 "$apt/download.log" >&2; die "apt-get download $* from $suite failed (log $apt/download.log)"; }
}

# fetch_busybox: Debian's busybox-static of $BUSYBOX_SUITE (apt_download), checked to be
# busybox $busybox_version. Prints the binary's path.
fetch_busybox() {
  local dir=$cache/busybox-$busybox_version-$ARCH bin deb banner
  bin=$dir/busybox
  if [[ -x $bin ]]; then
    echo "$bin"
    return 0
  fi
  rm -rf "$dir.tmp"
  apt_download "$BUSYBOX_SUITE" "$dir.tmp" busybox-static
  deb=$(ls "$dir.tmp"/busybox-static_*.deb)
  dpkg-deb -x "$deb" "$dir.tmp/x"
  banner=$("$dir.tmp/x/usr/bin/busybox" 2>&1 | head -n 1) || true
  [[ $banner == "BusyBox v$busybox_version "* ]] ||
    die "Debian $BUSYBOX_SUITE's busybox-static is '$banner', the upstream image is busybox $busybox_version: set BUSYBOX_SUITE"
  mv "$dir.tmp/x/usr/bin/busybox" "$dir.tmp/busybox"
  dpkg-deb -f "$deb" Version >"$dir.tmp/debian-version"
  rm -rf "$dir.tmp/x" "$deb" "$dir"
  mv "$dir.tmp" "$dir"
  echo "  $banner" >&2
  echo "$bin"
}

# busybox_root BIN OUT: the root filesystem tar of the busybox images: /bin/busybox, a link in
# /bin for every applet, the users and groups Docker's busybox image has, /tmp (1777), /root,
# /home, /var; fixed owners and times, so that the same binary gives the same layer.
busybox_root() {
  local bin=$1 out=$2 dir a
  dir=$(mktemp -d "$cache/root.XXXXXX")
  # The image's / (mktemp made it 0700, and a pod's non-root user could not reach /bin).
  chmod 0755 "$dir"
  mkdir -p "$dir"/{bin,etc,home,root,tmp,var,usr/bin,usr/sbin}
  chmod 1777 "$dir/tmp"
  chmod 0700 "$dir/root"
  install -m 0755 "$bin" "$dir/bin/busybox"
  for a in $("$bin" --list); do
    [[ $a == busybox ]] || ln -s busybox "$dir/bin/$a"
  done
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'daemon:x:1:1:daemon:/usr/sbin:/bin/false' \
    'nobody:x:65534:65534:nobody:/home:/bin/false' >"$dir/etc/passwd"
  printf '%s\n' 'root:x:0:' 'daemon:x:1:' 'nogroup:x:65534:' >"$dir/etc/group"
  chmod 0644 "$dir/etc/passwd" "$dir/etc/group"
  tar -C "$dir" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out.tmp" .
  mv "$out.tmp" "$out"
  rm -rf "$dir"
}

# glibc_root OUT: the busybox root (tar $rootfs) plus Debian $GLIBC_SUITE's libc6 (the C library
# and the dynamic loader), GNU dd from its coreutils in place of busybox's and its dash as
# /bin/sh, as a tar at OUT; the packages are downloaded once into $cache/glibc-$GLIBC_SUITE-$ARCH.
glibc_root() {
  local out=$1 debs=$cache/glibc-$GLIBC_SUITE-$ARCH dir x
  if [[ ! -f $debs/done ]]; then
    rm -rf "$debs"
    apt_download "$GLIBC_SUITE" "$debs" libc6 coreutils dash
    touch "$debs/done"
  fi
  dir=$(mktemp -d "$cache/glibc-root.XXXXXX")
  chmod 0755 "$dir"
  tar -C "$dir" -xf "$rootfs"
  x=$dir.x
  mkdir -p "$x"
  dpkg-deb -x "$(ls "$debs"/libc6_*.deb)" "$x/libc6"
  dpkg-deb -x "$(ls "$debs"/coreutils_*.deb)" "$x/coreutils"
  dpkg-deb -x "$(ls "$debs"/dash_*.deb)" "$x/dash"
  # libc6's shared objects and the loader, where it puts them (/lib/<triplet>, /lib64).
  cp -a "$x/libc6/lib" "$dir/" 2>/dev/null || cp -a "$x/libc6/usr/lib" "$dir/"
  [[ -d $x/libc6/lib64 ]] && cp -a "$x/libc6/lib64" "$dir/"
  rm -f "$dir/bin/dd"
  install -m 0755 "$x/coreutils/bin/dd" "$dir/bin/dd"
  install -m 0755 "$x/dash/bin/dash" "$dir/bin/dash"
  ln -sfn dash "$dir/bin/sh"
  rm -rf "$x"
  tar -C "$dir" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out.tmp" .
  mv "$out.tmp" "$out"
  rm -rf "$dir"
}

step "e2e-test-images: busybox $busybox_version (Debian $BUSYBOX_SUITE busybox-static)"
busybox_bin=$(fetch_busybox)
busybox_deb=$(cat "$(dirname "$busybox_bin")/debian-version")
rootfs=$cache/busybox-root-$busybox_version-$ARCH-$({ sha256sum <"$busybox_bin"; declare -f busybox_root; } | sha256sum | cut -c1-12).tar
[[ -s $rootfs ]] || busybox_root "$busybox_bin" "$rootfs"
echo "busybox root: $rootfs"
glibc_rootfs=$cache/glibc-root-$GLIBC_SUITE-$ARCH-$({ sha256sum <"$rootfs"; declare -f glibc_root; } | sha256sum | cut -c1-12).tar
[[ -s $glibc_rootfs ]] || glibc_root "$glibc_rootfs"
echo "glibc root: $glibc_rootfs"

agnhost=$K8S_BIN/agnhost
[[ -x $agnhost ]] || die "$agnhost is missing: build it with (cd tests/e2e && go run ./localcluster/cmd/localcluster build --kind)"
have=$("$agnhost" --version 2>/dev/null | awk '{print $NF}')
[[ $have == "$agnhost_tag" ]] || die "$agnhost reports version '$have', the suite wants agnhost:$agnhost_tag: rebuild it (localcluster build --kind --force)"

path_env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
busybox_source=https://tracker.debian.org/pkg/busybox
# NAME TAG then the kindctl image flags of each image.
images=(
  "busybox $busybox_tag --base-layer=$rootfs --cmd=sh --commit=debian-busybox-static-$busybox_deb --source=$busybox_source"
  "agnhost $agnhost_tag --base-layer=$rootfs --binary=$agnhost --cmd=pause --commit=k8s.io/kubernetes@$k8s_version --source=https://github.com/kubernetes/kubernetes"
  "nginx $nginx_tag --base-layer=$rootfs --cmd=sh --title=nginx-stand-in-busybox --commit=debian-busybox-static-$busybox_deb --source=$busybox_source"
  "glibc-dns-testing $glibc_tag --base-layer=$glibc_rootfs --cmd=sh --title=glibc-dns-testing-stand-in-busybox-glibc-gnu-dd --commit=debian-busybox-static-$busybox_deb+debian-$GLIBC_SUITE-libc6-coreutils --source=$busybox_source"
)
names=()
for spec in "${images[@]}"; do
  read -r name tag flags <<<"$spec"
  ref=$REGISTRY/$name:$tag
  out=$IMAGES_DIR/e2e-$name.tar
  # The inputs: the flags, the layers, and the code that writes the archive (its source, not
  # the kindctl binary, whose build info changes with every commit).
  key=$( { echo "$ref $ARCH $flags"; sha256sum "$rootfs" "$glibc_rootfs"
    if [[ $name == agnhost ]]; then sha256sum <"$agnhost"; fi
    cat "$root"/hack/kind/internal/ociimage/ociimage.go "$root"/hack/kind/cmd/kindctl/run.go "$root"/hack/kind/go.sum; } | sha256sum | cut -c1-16)
  # Cached outside the clone, so that a fresh CI clone copies instead of rebuilding.
  cached=$cache/archives/e2e-$name-$key.tar
  if [[ ! -s $cached ]]; then
    mkdir -p "$cache/archives"
    rm -f "$cache/archives/e2e-$name-"*.tar
    # shellcheck disable=SC2086 # flags is a list of kindctl flags without spaces
    "$kindctl" image --ref="$ref" --arch="$ARCH" --version="$tag" --env="$path_env" $flags --out="$cached.tmp"
    mv "$cached.tmp" "$cached"
  fi
  cp "$cached" "$out"
  echo "$name: $ref ($out, from $cached)"
  names+=("e2e-$name")
done
echo "${names[*]}" >"$IMAGES_DIR/e2e-test-images"
cat >"$IMAGES_DIR/e2e-repo-list.yaml" <<YAML
# KUBE_TEST_REPO_LIST for the upstream storage e2e on a cluster that has the images of
# hack/kind/offline/e2e-test-images.sh loaded (OFFLINE=1 make kind-up): upstream's e2e-test-images
# names and tags under a local registry name. The other registries stay upstream's (pause, in
# every node image, is registry.k8s.io's).
promoterE2eRegistry: $REGISTRY
YAML
echo "e2e-test-images: ${names[*]} in $IMAGES_DIR, KUBE_TEST_REPO_LIST=$IMAGES_DIR/e2e-repo-list.yaml (${SECONDS}s)"
