#!/usr/bin/env bash
# hack/kind/offline/node-image.sh [STEP...]: a kind v0.33.0 node image of Kubernetes v1.37.2
# built on this machine from the Go module proxy and Debian's archive only (no registry).
# Steps, each skipped when its result is cached under $FAKECLOUD_CACHE/kind/ by a key of its
# inputs (so a version bump or an edit of its inputs rebuilds only what changed):
#   1 tools   containerd, ctr, containerd-shim-runc-v2, crictl and a minimal CoreDNS (one go
#             build of hack/kind/offline/tools), pause (gcc -static), capdrop-runc and podnet
#             (hack/kind module)
#   2 rootfs  debootstrap of Debian bookworm with kind's base packages, kept as a tar
#   3 base    the rootfs plus kind's images/base/files and the tools, `docker import`ed
#   4 images  kube-apiserver, -controller-manager, -scheduler, kube-proxy, etcd, coredns and
#             pause as docker-loadable archives (kindctl image)
#   5 node    the base with the Kubernetes binaries, /kind/version and the images imported into
#             its containerd, `docker commit`ed, tagged and cached as a `docker save` archive
# With no STEP it runs all of them. The Kubernetes binaries come from
# tests/e2e/localcluster's build (~/.cache/fakecloud-csi/localcluster/v1.37.2/bin). The last
# line printed is the node image reference; it is also written to $FAKECLOUD_CACHE/kind/node-image.
# A whole build (step 5 run) then removes the entries and images of older keys
# (hack/kind/offline/prune-cache.sh): only the current key's stay.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
# shellcheck source=hack/kind/offline/lib.sh
source "$here/lib.sh"
export GOTOOLCHAIN=local

K8S_VERSION=v1.37.2
KIND_VERSION=v0.33.0
# What kind v0.33.0's base image builds (images/base/Dockerfile) and kubeadm v1.37.2 deploys
# (cmd/kubeadm/app/constants). etcd is what localcluster builds, tagged by its own version.
CONTAINERD_VERSION=v2.3.4
CRICTL_VERSION=v1.36.0
COREDNS_VERSION=v1.14.6
PAUSE_VERSION=3.10.2
ETCD_TAG=3.7.2-0
SUITE=bookworm
# kind's base package list (images/base/Dockerfile) without nfs-common and open-iscsi (no
# networked storage here), plus what kind's Dockerfile brings from its own builds and Debian
# has: runc and the CNI plugins; systemd-sysv for /sbin/init, dbus for systemd.
PACKAGES=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps,runc,containernetworking-plugins,socat

kind_src=${GOMODCACHE:-$(go env GOMODCACHE)}/sigs.k8s.io/kind@$KIND_VERSION
k8s_src=${GOMODCACHE:-$(go env GOMODCACHE)}/k8s.io/kubernetes@$K8S_VERSION
k8s_bin=${K8S_BIN:-$FAKECLOUD_CACHE/localcluster/$K8S_VERSION/bin}
cache=$FAKECLOUD_CACHE/kind
mkdir -p "$cache"
# Held shared while this build runs: prune-cache.sh (at the end of a whole build) removes other
# keys' entries only when it can hold it alone, so never one another build is writing or using.
exec {build_lock}>>"$cache/.build.lock"
flock -s "$build_lock"

# key WORDS... : a 12-hex key of the given strings and, for each that is a file, its content.
key() {
  local w
  for w in "$@"; do
    printf '%s\n' "$w"
    if [[ -f $w ]]; then sha256sum <"$w"; fi
  done | sha256sum | cut -c1-12
}

# timed NAME CMD...: run CMD, printing "NAME: still running (Ns)" every 30 s and the total.
timed() {
  local name=$1 start=$SECONDS pid rc=0
  shift
  "$@" &
  pid=$!
  while ! wait_for "$pid" 30; do echo "  ... $name: still running ($((SECONDS - start))s)"; done
  wait "$pid" || rc=$?
  echo "  $name: $((SECONDS - start))s (exit $rc)"
  return "$rc"
}

# wait_for PID SECONDS: true once PID has exited, false if it still runs after SECONDS.
wait_for() {
  local i
  for ((i = 0; i < $2; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 1
  done
  ! kill -0 "$1" 2>/dev/null
}

# logged FILE CMD...: run CMD with its output to FILE.
logged() {
  local log=$1
  shift
  "$@" >"$log" 2>&1
}

tools_mod=$here/tools
tools_key=$(key "$CONTAINERD_VERSION" "$CRICTL_VERSION" "$COREDNS_VERSION" "$PAUSE_VERSION" \
  "$(go env GOVERSION)" "$tools_mod/go.mod" "$tools_mod/go.sum" "$tools_mod/cmd/coredns/main.go")
tools_bin=$cache/tools-$tools_key/bin

# The hack/kind programs that go into the node (the runc wrapper, the CNI); rebuilt every run
# (seconds, from the Go build cache) so that an edit to them always reaches the image.
hack_bin=$cache/hack-bin

step_tools() {
  step "1 tools: containerd $CONTAINERD_VERSION, crictl $CRICTL_VERSION, coredns $COREDNS_VERSION, pause $PAUSE_VERSION"
  if [[ -x $tools_bin/coredns && -x $tools_bin/pause ]]; then
    echo "  cached: $tools_bin"
  else
    mkdir -p "$tools_bin.tmp"
    # One go build for all five (a single link cache and dependency graph); -X of a package a
    # binary does not link is ignored. The build tags are containerd's own (kind's Dockerfile).
    local ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
    ldflags+=" -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
    (cd "$tools_mod" && timed "go build (5 binaries)" env CGO_ENABLED=0 nice -n 10 go build -trimpath \
      -tags "no_aufs no_zfs no_btrfs no_devmapper" -ldflags "$ldflags" -o "$tools_bin.tmp/" \
      github.com/containerd/containerd/v2/cmd/containerd \
      github.com/containerd/containerd/v2/cmd/ctr \
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
      sigs.k8s.io/cri-tools/cmd/crictl \
      ./cmd/coredns)
    # pause as its Makefile builds it (CFLAGS with VERSION=v$(TAG)-$(REV)); REV there is the
    # git describe of the kubernetes tree, here the release the source comes from.
    gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-$K8S_VERSION" \
      -o "$tools_bin.tmp/pause" "$k8s_src/build/pause/linux/pause.c"
    rm -rf "$tools_bin"
    mv "$tools_bin.tmp" "$tools_bin"
    ls -l "$tools_bin"
  fi
  mkdir -p "$hack_bin"
  local progs=(./cmd/capdrop-runc ./cmd/kindctl)
  if [[ -d $root/hack/kind/cmd/podnet ]]; then progs+=(./cmd/podnet); fi
  # -buildvcs=false: the binaries (and so the cache keys of steps 3-5) depend on the sources
  # only, not on the work tree's git state.
  (cd "$root/hack/kind" && CGO_ENABLED=0 nice -n 10 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$hack_bin/" "${progs[@]}")
  echo "  hack/kind: ${progs[*]} -> $hack_bin"
}

rootfs_key=$(key "$SUITE" "$PACKAGES" "$(dpkg-query -W -f='${Version}' debootstrap 2>/dev/null || true)")
rootfs_tar=$cache/rootfs-$SUITE-$rootfs_key.tar

step_rootfs() {
  step "2 rootfs: debootstrap --variant=minbase $SUITE (${PACKAGES//,/ })"
  if [[ -s $rootfs_tar ]]; then
    echo "  cached: $rootfs_tar ($(du -h "$rootfs_tar" | cut -f1))"
    return 0
  fi
  command -v debootstrap >/dev/null || die "no debootstrap: apt-get install debootstrap"
  local dir=$cache/rootfs.tmp
  rm -rf "$dir"
  mkdir -p "$dir"
  timed debootstrap logged "$cache/debootstrap.log" \
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$dir" || { tail -n 20 "$cache/debootstrap.log" >&2; die "debootstrap failed (log $cache/debootstrap.log)"; }
  # Smaller image, nothing else changes: apt's downloaded packages and lists.
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" --numeric-owner -cf "$rootfs_tar.tmp" .
  mv "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$dir"
  echo "  $rootfs_tar ($(du -h "$rootfs_tar" | cut -f1))"
}

# with_rootfs FN ARGS...: unpack the cached rootfs into a fresh folder, run FN FOLDER ARGS...,
# remove the folder.
with_rootfs() {
  local fn=$1 dir rc=0
  shift
  dir=$(mktemp -d "$cache/rootfs-work.XXXXXX")
  tar -C "$dir" --numeric-owner -xf "$rootfs_tar"
  "$fn" "$dir" "$@" || rc=$?
  rm -rf "$dir"
  return "$rc"
}

# pkg_closure ROOT PKG...: the packages PKG... need in ROOT's dpkg database (Depends and
# Pre-Depends, first alternative each, recursively), one per line.
pkg_closure() {
  local root=$1 p deps
  shift
  local -A seen=()
  local todo=("$@")
  while ((${#todo[@]})); do
    p=${todo[0]}
    todo=("${todo[@]:1}")
    [[ -n ${seen[$p]:-} ]] && continue
    seen[$p]=1
    echo "$p"
    deps=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Depends}, ${Pre-Depends}' "$p")
    # "a (>= 1), b | c, d:any" -> a b d
    while read -r d; do
      [[ -n $d ]] && todo+=("$d")
    done < <(tr ',' '\n' <<<"$deps" | sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g')
  done
}

# netfilter_layer ROOT OUT: a tar at OUT of what kube-proxy execs (iptables, ip6tables and their
# -save/-restore, nft, conntrack) with every file of the Debian packages they need, and the
# alternatives symlinks that pick the nft backend (Debian's default, what kind's entrypoint
# picks when the host's rules are nft ones, as Docker on bookworm writes them). The same idea
# as the upstream kube-proxy image's distroless-iptables base, from this machine's rootfs.
netfilter_layer() {
  local root=$1 out=$2 p f list line rel
  list=$(mktemp)
  # The merged-/usr symlinks, so that /lib64/ld-linux-x86-64.so.2 resolves.
  printf '%s\n' bin sbin lib lib64 >"$list"
  for p in $(pkg_closure "$root" iptables nftables conntrack); do
    f=$root/var/lib/dpkg/info/$p.list
    [[ -f $f ]] || f=$root/var/lib/dpkg/info/$p:$(dpkg --print-architecture).list
    [[ -f $f ]] || die "no file list of package $p in the rootfs"
    # Paths as the packages name them (/lib/x86_64-linux-gnu/...) canonicalised through the
    # merged-/usr symlinks of the rootfs, so the layer holds each file once under /usr.
    while read -r line; do
      [[ $line == / || $line == /usr/share/doc* || $line == /usr/share/man* || $line == /usr/share/locale* ]] && continue
      [[ -e $root$line || -L $root$line ]] || continue
      if [[ -d $root$line && ! -L $root$line ]]; then continue; fi
      rel=$(realpath --relative-to="$root" "$(dirname "$root$line")")/$(basename "$line")
      echo "${rel#./}"
    done <"$f" >>"$list.pkg"
  done
  cat "$list.pkg" >>"$list"
  rm -f "$list.pkg"
  for f in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    printf '%s\n' "etc/alternatives/$f" "usr/sbin/$f" >>"$list"
  done
  sort -u -o "$list" "$list"
  tar -C "$root" --numeric-owner --no-recursion -cf "$out" -T "$list"
  rm -f "$list"
}

kind_files=$kind_src/images/base/files
podnet_unit=$here/node/podnet.service

# base_key: what the base image is made of (the rootfs, the tools, kind's files, the hack/kind
# programs, the functions that assemble it).
base_key() {
  local f
  {
    echo "$rootfs_key $tools_key $KIND_VERSION"
    find "$kind_files" -type f | sort | xargs sha256sum
    sha256sum "$hack_bin"/*
    declare -f install_base_files import_dir
    if [[ -f $podnet_unit ]]; then sha256sum "$podnet_unit"; fi
  } | sha256sum | cut -c1-12
}

# install_base_files ROOT: what kind's images/base/Dockerfile does on top of debian, done on
# the folder ROOT: its files (scripts 0755, the rest 0644), the unit cleanup and enablement,
# then what its later stages build (containerd, runc, crictl, CNI plugins) from ours.
install_base_files() {
  local r=$1 f
  install -D -m 0755 -t "$r/usr/local/bin" "$kind_files"/usr/local/bin/*
  mkdir -p "$r/kind/bin" "$r/LICENSES"
  install -m 0644 -t "$r/kind" "$kind_files"/kind/README.txt
  install -m 0755 -t "$r/kind/bin" "$kind_files"/kind/bin/*
  install -m 0644 -t "$r/LICENSES" "$kind_files"/LICENSES/*
  install -m 0644 -t "$r/etc" "$kind_files"/etc/crictl.yaml
  install -D -m 0644 -t "$r/etc/containerd" "$kind_files"/etc/containerd/*
  install -D -m 0644 -t "$r/etc/default" "$kind_files"/etc/default/*
  install -D -m 0644 -t "$r/etc/sysctl.d" "$kind_files"/etc/sysctl.d/*
  install -D -m 0644 -t "$r/etc/systemd/system" "$kind_files"/etc/systemd/system/*.service "$kind_files"/etc/systemd/system/*.slice
  install -D -m 0644 -t "$r/etc/systemd/system/kubelet.service.d" "$kind_files"/etc/systemd/system/kubelet.service.d/*
  # The Dockerfile's clean-up of units that make no sense in a container.
  find "$r/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
    "$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
    "$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
  ln -sfn /usr/lib/systemd/systemd "$r/sbin/init"
  mkdir -p "$r/etc/kubernetes/manifests"
  # The binaries kind builds in its later stages; runc is Debian's (/usr/sbin/runc) behind the
  # capability-dropping wrapper, which containerd finds first on PATH.
  install -m 0755 -t "$r/usr/local/bin" "$tools_bin"/{containerd,ctr,containerd-shim-runc-v2,crictl}
  install -D -m 0755 "$hack_bin/capdrop-runc" "$r/usr/local/sbin/runc"
  mkdir -p "$r/opt/cni/bin"
  cp -a "$r"/usr/lib/cni/. "$r/opt/cni/bin/"
  # kind's base spec: ctr's default OCI spec with the hook that mounts product_uuid, no rlimits.
  "$tools_bin/ctr" oci spec |
    jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' >"$r/etc/containerd/cri-base.json"
  # kubeadm v1.37.2 wants pause 3.10.2 (kind's file says 3.10). restrict_oom_score_adj: runc
  # may not lower oom_score_adj here (no CAP_SYS_RESOURCE), and pod sandboxes die with
  # "can't get final child's PID from pipe: EOF" otherwise.
  sed -i -e "s|registry.k8s.io/pause:3.10\"|registry.k8s.io/pause:$PAUSE_VERSION\"|" \
    -e 's|restrict_oom_score_adj = false|restrict_oom_score_adj = true|' "$r/etc/containerd/config.toml"
  grep -q "pause:$PAUSE_VERSION\"" "$r/etc/containerd/config.toml" || die "containerd config: sandbox_image not set"
  grep -q 'restrict_oom_score_adj = true' "$r/etc/containerd/config.toml" || die "containerd config: restrict_oom_score_adj not set"
  local units=(kubelet.service containerd.service undo-mount-hacks.service)
  # The CNI (hack/kind/cmd/podnet) runs on every node as a service, not as a pod.
  if [[ -x $hack_bin/podnet && -f $podnet_unit ]]; then
    install -m 0755 "$hack_bin/podnet" "$r/usr/local/bin/podnet"
    install -m 0644 "$podnet_unit" "$r/etc/systemd/system/podnet.service"
    units+=(podnet.service)
  else
    echo "  warning: no podnet (hack/kind/cmd/podnet, $podnet_unit): the nodes get no CNI" >&2
  fi
  systemctl --root="$r" --quiet enable "${units[@]}"
  systemctl --root="$r" --quiet mask systemd-binfmt.service
  echo "  enabled: ${units[*]}"
}

# import_dir DIR REF: the folder DIR as the one-layer image REF. `docker import --change` takes
# no STOPSIGNAL, so a Dockerfile of metadata only (no RUN, no context) adds it on top.
import_dir() {
  local tmp=$2-import
  tar -C "$1" --numeric-owner -cf - . | docker import \
    --change "ENV container=docker" \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "$tmp" >/dev/null
  printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$tmp" | docker build -q -t "$2" - >/dev/null
  docker rmi "$tmp" >/dev/null
}

step_base() {
  base_ref=localhost/fakecloud-csi/kind-base:$K8S_VERSION-$(base_key)
  step "3 base: $base_ref"
  if docker image inspect "$base_ref" >/dev/null 2>&1; then
    echo "  cached: $base_ref"
    return 0
  fi
  local dir
  dir=$(mktemp -d "$cache/base-work.XXXXXX")
  tar -C "$dir" --numeric-owner -xf "$rootfs_tar"
  install_base_files "$dir"
  # One layer from the folder (no Dockerfile RUN steps), with the metadata kind's Dockerfile
  # sets: systemd must know it runs in a container and stops on SIGRTMIN+3.
  timed "docker import" import_dir "$dir" "$base_ref"
  rm -rf "$dir"
  echo "  $base_ref ($(docker image inspect -f '{{.Size}}' "$base_ref" | awk '{printf "%d MB", $1/1e6}'))"
}

# The images kubeadm v1.37.2 runs, and where each one's program must be: kubeadm's static pods
# run kube-apiserver, kube-controller-manager, kube-scheduler and etcd by name (PATH), its
# kube-proxy DaemonSet runs /usr/local/bin/kube-proxy, its CoreDNS Deployment the image's
# entrypoint /coredns, the CRI the sandbox image's /pause. NAME REF DIR BINARY each.
component_images() {
  local b=$k8s_bin
  cat <<EOF
kube-apiserver registry.k8s.io/kube-apiserver:$K8S_VERSION /usr/local/bin $b/kube-apiserver
kube-controller-manager registry.k8s.io/kube-controller-manager:$K8S_VERSION /usr/local/bin $b/kube-controller-manager
kube-scheduler registry.k8s.io/kube-scheduler:$K8S_VERSION /usr/local/bin $b/kube-scheduler
kube-proxy registry.k8s.io/kube-proxy:$K8S_VERSION /usr/local/bin $b/kube-proxy
etcd registry.k8s.io/etcd:$ETCD_TAG /usr/local/bin $b/etcd
coredns registry.k8s.io/coredns/coredns:$COREDNS_VERSION / $tools_bin/coredns
pause registry.k8s.io/pause:$PAUSE_VERSION / $tools_bin/pause
EOF
}

k8s_bins=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd)

images_key() {
  {
    echo "$rootfs_key $tools_key $K8S_VERSION $ETCD_TAG"
    component_images
    (cd "$k8s_bin" && sha256sum "${k8s_bins[@]}")
    sha256sum "$hack_bin/kindctl"
    declare -f netfilter_layer pkg_closure step_images
  } | sha256sum | cut -c1-12
}

check_k8s_bins() {
  local b v
  for b in "${k8s_bins[@]}"; do
    [[ -x $k8s_bin/$b ]] || die "no $k8s_bin/$b: build the Kubernetes binaries first (cd tests/e2e && go run ./localcluster/cmd/localcluster build --kind)"
  done
  # The etcd tag must say what the binary is.
  v=$("$k8s_bin/etcd" --version | sed -n 's/^etcd Version: //p')
  [[ "$v-0" == "$ETCD_TAG" ]] || die "etcd is $v, but ETCD_TAG is $ETCD_TAG"
}

step_images() {
  check_k8s_bins
  images_dir=$cache/images-$(images_key)
  step "4 images: $(component_images | awk '{print $2}' | tr '\n' ' ')"
  if [[ -f $images_dir/done ]]; then
    echo "  cached: $images_dir"
    return 0
  fi
  rm -rf "$images_dir.tmp"
  mkdir -p "$images_dir.tmp"
  with_rootfs netfilter_layer "$images_dir.tmp/netfilter-layer.tar"
  local name ref dir bin args
  while read -r name ref dir bin; do
    args=(--binary="$bin" --ref="$ref" --dir="$dir" --format=docker --out="$images_dir.tmp/$name.tar"
      --env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
    case $name in
      kube-proxy) args+=(--base-layer="$images_dir.tmp/netfilter-layer.tar") ;;
    esac
    case $name in
      coredns) args+=(--version="$COREDNS_VERSION" --commit="github.com/coredns/coredns@$COREDNS_VERSION" --source=https://github.com/coredns/coredns) ;;
      pause) args+=(--version="$PAUSE_VERSION" --commit="k8s.io/kubernetes@$K8S_VERSION" --source=https://github.com/kubernetes/kubernetes) ;;
      etcd) args+=(--version="v${ETCD_TAG%-0}" --commit="go.etcd.io/etcd/server/v3@v${ETCD_TAG%-0}" --source=https://github.com/etcd-io/etcd) ;;
      *) args+=(--version="$K8S_VERSION" --commit="k8s.io/kubernetes@$K8S_VERSION" --source=https://github.com/kubernetes/kubernetes) ;;
    esac
    "$hack_bin/kindctl" image "${args[@]}" | sed 's/^/  /'
  done < <(component_images)
  rm -f "$images_dir.tmp/netfilter-layer.tar"
  touch "$images_dir.tmp/done"
  rm -rf "$images_dir"
  mv "$images_dir.tmp" "$images_dir"
  du -sh "$images_dir"/*.tar | sed 's/^/  /'
}

# The manifests kind applies from the node. default-storage.yaml: kind applies whatever this
# file holds (an empty one fails `kubectl apply`); its usual content, local-path-provisioner,
# has no image here, and a default class nobody provisions would leave every PVC without a
# class Pending forever. So: a "standard" class that says there is no provisioner, not the
# default (the project's tests name their class, fakecloud-disk). default-cni.yaml: kind
# applies it unless disableDefaultCNI; the CNI is the node's podnet service, so it only records
# that (and a config without disableDefaultCNI works too, instead of applying kindnetd).
default_storage_manifest='# No dynamic provisioning in the offline kind node image: local-path-provisioner
# has no image here. Name a StorageClass with a real provisioner (fakecloud-disk).
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer'
default_cni_manifest='# The CNI of the offline kind node image is podnet, a systemd service on every node
# (/usr/local/bin/podnet, podnet.service); kind applies this instead of kindnetd.
apiVersion: v1
kind: ConfigMap
metadata:
  name: podnet
  namespace: kube-system
data:
  cni: podnet.service on every node writes /etc/cni/net.d/10-podnet.conflist'

node_key() {
  {
    echo "$base_ref $images_dir $K8S_VERSION"
    (cd "$k8s_bin" && sha256sum kubeadm kubelet kubectl)
    echo "$default_storage_manifest$default_cni_manifest"
    declare -f build_node
  } | sha256sum | cut -c1-8
}

# build_node REF: what `kind build node-image` does (pkg/build/nodeimage/buildcontext.go), with
# the images from step 4 instead of pulls: a container of the base, the Kubernetes binaries in
# /usr/bin, /kind/version, the manifests, the images imported into its containerd (pinned, not
# unpacked, as kind does), then a commit.
# A subshell, so that its EXIT trap removes the build container however it ends: a RETURN
# trap does not run when die or set -e exits, and left the container running.
build_node() (
  local ref=$1 id b a want have missing=()
  id=fakecloud-node-build-$$
  # shellcheck disable=SC2064 # the id is fixed now
  trap "docker rm -f -v $id >/dev/null 2>&1 || true" EXIT
  docker run -d --entrypoint=sleep --name="$id" --security-opt seccomp=unconfined "$base_ref" infinity >/dev/null
  for b in kubeadm kubelet kubectl; do
    docker cp "$k8s_bin/$b" "$id:/usr/bin/$b"
    docker exec "$id" chown root:root "/usr/bin/$b"
    docker exec "$id" chmod 0755 "/usr/bin/$b"
  done
  docker exec -i "$id" sh -c 'mkdir -p /kind/manifests && cat >/kind/version' <<<"$K8S_VERSION"
  docker exec -i "$id" sh -c 'cat >/kind/manifests/default-storage.yaml' <<<"$default_storage_manifest"
  docker exec -i "$id" sh -c 'cat >/kind/manifests/default-cni.yaml' <<<"$default_cni_manifest"
  docker exec "$id" sh -c 'nohup containerd >/var/log/containerd-build.log 2>&1 & echo $! >/run/containerd-build.pid'
  docker exec "$id" sh -c 'for i in $(seq 30); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 1; done; cat /var/log/containerd-build.log; exit 1'
  for a in "$images_dir"/*.tar; do
    # As kind's importer, without --digests (it only adds import-<date>@sha256 names).
    docker exec -i "$id" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
      --all-platforms --no-unpack - <"$a" 2>&1 | { grep -E 'saved|error|ctr:' || true; } | sed 's/^/  /'
  done
  # Every image kubeadm will run (with the etcd tag the kind config sets) must be there now.
  have=$(docker exec "$id" ctr --namespace=k8s.io images list -q)
  want=$(printf 'apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: %s\netcd:\n  local:\n    imageTag: "%s"\n' "$K8S_VERSION" "$ETCD_TAG" |
    docker exec -i "$id" sh -c 'cat >/tmp/kubeadm.yaml && kubeadm config images list --config /tmp/kubeadm.yaml && rm /tmp/kubeadm.yaml')
  for b in $want; do grep -qxF "$b" <<<"$have" || missing+=("$b"); done
  ((${#missing[@]} == 0)) || die "the node image lacks ${missing[*]} (kubeadm config images list)"
  echo "  kubeadm's images all present: $(tr '\n' ' ' <<<"$want")"
  # The container's PID 1 is sleep, which reaps nothing: containerd is done once it is a zombie.
  docker exec "$id" sh -c 'p=$(cat /run/containerd-build.pid); kill "$p"
    while [ -e "/proc/$p" ] && [ "$(cut -d" " -f3 "/proc/$p/stat")" != Z ]; do sleep 0.2; done
    rm -f /run/containerd-build.pid /var/log/containerd-build.log'
  docker commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' "$id" "$ref" >/dev/null
)

step_node() {
  [[ -n ${base_ref:-} ]] || base_ref=localhost/fakecloud-csi/kind-base:$K8S_VERSION-$(base_key)
  [[ -n ${images_dir:-} ]] || images_dir=$cache/images-$(images_key)
  node_ref=localhost/fakecloud-csi/kind-node:$K8S_VERSION-$(node_key)
  local archive=$cache/kind-node-${node_ref##*:}.tar
  step "5 node: $node_ref"
  if docker image inspect "$node_ref" >/dev/null 2>&1; then
    echo "  in the Docker engine already"
  elif [[ -s $archive ]]; then
    timed "docker load" logged /dev/null docker load -i "$archive"
  else
    timed "build" build_node "$node_ref"
    timed "docker save" docker save -o "$archive.tmp" "$node_ref"
    mv "$archive.tmp" "$archive"
  fi
  echo "  $node_ref ($(docker image inspect -f '{{.Size}}' "$node_ref" | awk '{printf "%d MB", $1/1e6}'), archive $archive)"
  echo "$node_ref" >"$cache/node-image"
  # What the cluster on this image needs to be told: kubeadm's etcd tag (kindctl kind-config
  # --etcd-tag) and an image every node has for pods that only hold volumes (the e2e suite's
  # -pod-image): the sandbox image.
  printf 'ETCD_TAG=%s\nPOD_IMAGE=registry.k8s.io/pause:%s\n' "$ETCD_TAG" "$PAUSE_VERSION" >"$cache/node-image.env"
}

main() {
  local steps=("$@")
  ((${#steps[@]})) || steps=(tools rootfs base images node)
  local s
  for s in "${steps[@]}"; do
    case $s in
      tools | rootfs | base | images | node) "step_$s" ;;
      *) die "unknown step $s (tools rootfs base images node)" ;;
    esac
  done
  if [[ -n ${node_ref:-} ]]; then
    # The current key of every step is written now: what older keys left goes (the last line
    # printed stays the node image reference).
    step "cache: older keys' entries"
    flock -u "$build_lock"
    "$here/prune-cache.sh" "$cache" "tools-$tools_key" "${images_dir##*/}" "${rootfs_tar##*/}" \
      "kind-node-${node_ref##*:}.tar" "$base_ref" "$node_ref"
    echo "node-image.sh: done in ${SECONDS}s"
    echo "$node_ref"
  fi
}

main "$@"
