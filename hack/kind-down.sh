#!/usr/bin/env bash
# make kind-down: delete the kind cluster of make kind-up / make e2e and its volumes' data
# (_output/kind/volumes), then stop the Docker engine
# that OFFLINE=1 started (hack/kind/offline/dockerd.sh stop does nothing when it started none, and
# puts the host's bridges, iptables and ip_forward back as they were).
set -euo pipefail
cd "$(dirname "$0")/.."
KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-fakecloud-csi}
if docker info >/dev/null 2>&1; then
  go tool -modfile=tools/go.mod kind delete cluster --name "$KIND_CLUSTER_NAME"
fi
# The cluster's disks (deploy/kind/kind-config.yaml extraMounts) go with it, as its fake cloud does.
volumes=${KIND_DIR:-_output/kind}/volumes
# A block volume is a loop device of the host's kernel (kind nodes share it), attached without
# autoclear, so it outlives a cluster deleted while the volume was staged. Detach the loops over
# files in $volumes first (matched by inode: the kernel names the file as the node saw it), or
# they stay attached to deleted files for good.
if [[ -d $volumes ]] && command -v losetup >/dev/null; then
  mapfile -t files < <(find "$volumes" -name block.img -type f -exec stat -c '%Hd:%Ld %i' {} +)
  if ((${#files[@]})); then
    while read -r dev majmin ino; do
      for f in "${files[@]}"; do
        if [[ "$majmin $ino" == "$f" ]]; then losetup -d "$dev" && echo "kind-down: detached $dev"; fi
      done
    done < <(losetup --list --noheadings -O NAME,BACK-MAJ:MIN,BACK-INO)
  fi
fi
rm -rf "$volumes"
hack/kind/offline/dockerd.sh stop
