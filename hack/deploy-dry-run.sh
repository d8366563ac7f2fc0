#!/usr/bin/env bash
# make deploy-dry-run KUBECONFIG=...: every manifest of deploy/base (and the
# external-snapshotter release of deploy/base/snapshot), then of its overlays deploy/kind and
# deploy/kind-offline (with their snapshot/ folders), sent to a real API server as a
# server-side dry run, so schema, admission and RBAC (escalation checks included) are
# checked by that server and nothing is stored. The server cannot dry-run an object whose
# namespace or CRD does not exist, so the Namespace and the CRDs are applied for real (a
# namespace and CRD definitions, no workloads). Needs Go only. KINDCTL: a kindctl binary to use
# instead of `go run` (make deploy-check-local builds one).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBECONFIG:?set KUBECONFIG to the cluster to check against}"
if [[ -n ${KINDCTL:-} ]]; then kindctl=("$KINDCTL"); else kindctl=(go -C hack/kind run ./cmd/kindctl); fi
root=$(pwd)
"${kindctl[@]}" snapshotter --deploy "$root/deploy/base" --out "$root/_output/external-snapshotter"
"${kindctl[@]}" apply --kubeconfig "$KUBECONFIG" --dry-run --real-prerequisites \
  "$root/deploy/base/snapshot" "$root/deploy/base"
# The overlays change the seed, the fake cloud's Service and pod templates (args, images,
# containers, probes): the same server checks them, against the same prerequisites.
"${kindctl[@]}" apply --kubeconfig "$KUBECONFIG" --dry-run --real-prerequisites \
  "$root/deploy/kind/snapshot" "$root/deploy/kind"
"${kindctl[@]}" apply --kubeconfig "$KUBECONFIG" --dry-run --real-prerequisites \
  "$root/deploy/kind-offline/snapshot" "$root/deploy/kind-offline"
