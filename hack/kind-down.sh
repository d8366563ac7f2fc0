#!/usr/bin/env bash
# make kind-down: delete the kind cluster of make kind-up / make e2e.
set -euo pipefail
cd "$(dirname "$0")/.."
KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-fakecloud-csi}
go tool -modfile=tools/go.mod kind delete cluster --name "$KIND_CLUSTER_NAME"
