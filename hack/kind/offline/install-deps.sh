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
)
missing=()
for cmd in "${!pkg_of[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${pkg_of[$cmd]}")
done
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
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done in $((SECONDS - start))s"
