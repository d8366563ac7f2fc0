#!/usr/bin/env bash
# `make deploy-check-local`: what CI can check of the kind deployment without Docker. It
# starts a local cluster of upstream v1.37.2 binaries (make up-local), sends every manifest
# of deploy/kind and of its offline overlay deploy/kind-offline to its API server as a
# server-side dry run (make deploy-dry-run), and stops
# the cluster again, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
run_dir=$(mktemp -d -t fcsi-deploy-check.XXXXXX)
(cd tests/e2e && go run ./localcluster/cmd/localcluster up --run-dir="$run_dir")
trap '(cd tests/e2e && go run ./localcluster/cmd/localcluster down --run-dir="$run_dir") || true' EXIT
KUBECONFIG="$run_dir/kubeconfig-admin" hack/deploy-dry-run.sh
echo "deploy/kind, deploy/kind-offline: every manifest accepted by a v1.37.2 API server (server-side dry run)"
