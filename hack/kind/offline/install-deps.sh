#!/usr/bin/env bash
# hack/kind/offline/install-deps.sh: the Debian packages the offline kind build needs, installed
# only when a command is missing (a laptop with Docker needs none of this). docker.io brings
# dockerd, containerd and runc; debootstrap builds the node image's root filesystem; iptables is
# what dockerd programs. A temporary policy-rc.d keeps apt from starting the daemons: dockerd.sh
# starts its own, with its own data root, and stops it again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kind/offline/lib.sh
source "$here/lib.sh"

declare -A pkg_of=(
  [dockerd]=docker.io [containerd]=containerd [runc]=runc [debootstrap]=debootstrap
  [iptables]=iptables [nft]=nftables [ip]=iproute2 [gcc]=gcc [setsid]=util-linux
  # node-image.sh edits the containerd spec with jq and enables units with systemctl --root;
  # dockerd.sh records and restores ip_forward with sysctl.
  [jq]=jq [systemctl]=systemd [sysctl]=procps
)
missing=()
for cmd in "${!pkg_of[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${pkg_of[$cmd]}")
done
# gcc -static (the pause binary) needs libc's headers and static archive, which gcc only
# recommends (and --no-install-recommends below skips).
dpkg-query -W -f='${Status}' libc6-dev 2>/dev/null | grep -q 'ok installed' || missing+=(libc6-dev)
if ((${#missing[@]} == 0)); then
  echo "install-deps: everything present"
  exit 0
fi
[[ $(id -u) == 0 ]] || die "missing ${missing[*]}: install them (Debian: apt-get install ${missing[*]}) or run as root"
command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get: install them with your package manager"
echo "install-deps: installing ${missing[*]}"
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
fi
trap '[[ $created_policy == 1 ]] && rm -f "$policy"' EXIT
start=$SECONDS
# Not silent: downloading docker.io and debootstrap takes minutes on a slow mirror.
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done in $((SECONDS - start))s"
