#!/usr/bin/env bash
# `make deploy-check-local`: what CI can check of the deployments without Docker, on a local
# cluster of upstream v1.37.2 binaries (make up-local), stopped again at the end, also on
# failure:
#   1. every manifest of deploy/base, deploy/kind and deploy/kind-offline (and their snapshot/
#      folders) sent to its API server as a server-side dry run (make deploy-dry-run);
#   2. deploy/base applied for real, as docs/real-cluster.md tells a user to: through an
#      overlay whose only change is the images (kustomize `images:`, a registry's names);
#   3. a short check through it (kindctl check): a claim and a pod on one node, attached
#      through the fake cloud; the node's out-of-band slots raised with the fake cloud's API
#      (to one slot fewer than its count) and its CSINode count following, then back;
#      everything deleted, the cloud volume too.
# The local cluster runs the driver, the fake cloud and the sidecars as processes (its hollow
# kubelets run no containers), so step 3 exercises deploy/base's CSIDriver, StorageClass and
# RBAC with those processes; the applied Deployments and DaemonSet get pods but no container
# runs. The same check runs on a real cluster (docs/real-cluster.md) against deploy/base's own
# pods.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
say() { echo "== [$(($(date +%s) - start))s] $*"; }
root=$(pwd)
run_dir=$(mktemp -d -t fcsi-deploy-check.XXXXXX)
say "starting a local cluster in $run_dir"
(cd tests/e2e && go run ./localcluster/cmd/localcluster up --run-dir="$run_dir")
trap '(cd tests/e2e && go run ./localcluster/cmd/localcluster down --run-dir="$run_dir") || true' EXIT
export KUBECONFIG="$run_dir/kubeconfig-admin"

kindctl="$run_dir/kindctl"
go -C hack/kind build -o "$kindctl" ./cmd/kindctl

say "1. server-side dry run of deploy/base, deploy/kind, deploy/kind-offline"
KINDCTL=$kindctl hack/deploy-dry-run.sh
say "every manifest accepted by a v1.37.2 API server (server-side dry run)"

say "2. apply deploy/base with the images renamed (kustomize images:, docs/real-cluster.md)"
# kustomize takes no absolute path to a base: the overlay lives in the clone's _output.
overlay=_output/deploy-check
mkdir -p "$overlay"
cat >"$overlay/kustomization.yaml" <<'EOF'
# Written by hack/deploy-check-local.sh: deploy/base as a cluster that pulls from a registry
# applies it (docs/real-cluster.md).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../deploy/base
images:
  - name: localhost/fakecloud-csi/driver
    newName: registry.example.com/fakecloud-csi/driver
    newTag: v0.0.0-check
  - name: localhost/fakecloud-csi/fakecloud
    newName: registry.example.com/fakecloud-csi/fakecloud
    newTag: v0.0.0-check
EOF
# Every image of ours is renamed: nothing would be left pointing at an image only kind has.
if left=$("$kindctl" render "$overlay" | grep -E '^[[:space:]]*image:[[:space:]]*localhost/'); then
  echo "the overlay leaves images named localhost/: $left" >&2
  exit 1
fi
"$kindctl" apply --kubeconfig "$KUBECONFIG" "$root/deploy/base/snapshot" "$overlay"

say "3. check: claim, pod, attach, CSINode count following the fake cloud, delete"
info=$(cat "$run_dir/cluster.json")
cloud_url=$(grep -o '"cloudURL":"[^"]*"' <<<"$info" | cut -d'"' -f4)
token_file=$(grep -o '"adminTokenFile":"[^"]*"' <<<"$info" | cut -d'"' -f4)
[[ -n $cloud_url && -n $token_file ]] || { echo "no cloudURL or adminTokenFile in $run_dir/cluster.json" >&2; exit 1; }
"$kindctl" check --kubeconfig "$KUBECONFIG" --cloud-url "$cloud_url" --cloud-token-file "$token_file" --timeout 90s
say "deploy/base, deploy/kind, deploy/kind-offline: accepted by a v1.37.2 API server; deploy/base applied and checked end to end"
