#!/usr/bin/env bash
# make deploy-dry-run KUBECONFIG=...: every manifest of deploy/kind (and the
# external-snapshotter release of deploy/kind/snapshot), then of their offline overlays
# (deploy/kind-offline, deploy/kind-offline/snapshot), sent to a real API server as a
# server-side dry run, so schema, admission and RBAC (escalation checks included) are
# checked by that server and nothing is stored. The server cannot dry-run an object whose
# namespace or CRD does not exist, so the Namespace and the CRDs are applied for real (a
# namespace and CRD definitions, no workloads). Needs Go only.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBECONFIG:?set KUBECONFIG to the cluster to check against}"
kindctl=(go -C hack/kind run ./cmd/kindctl)
root=$(pwd)
"${kindctl[@]}" snapshotter --deploy "$root/deploy/kind" --out "$root/_output/external-snapshotter"
"${kindctl[@]}" apply --kubeconfig "$KUBECONFIG" --dry-run --real-prerequisites \
  "$root/deploy/kind/snapshot" "$root/deploy/kind"
# The offline overlays change pod templates only (images, containers, probes): the same
# server checks them, against the same prerequisites.
"${kindctl[@]}" apply --kubeconfig "$KUBECONFIG" --dry-run --real-prerequisites \
  "$root/deploy/kind-offline/snapshot" "$root/deploy/kind-offline"
