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
rm -rf "${KIND_DIR:-_output/kind}/volumes"
hack/kind/offline/dockerd.sh stop
