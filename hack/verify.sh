#!/usr/bin/env bash
# The one gate before tests: formatting, vet and tidy go.mod files in every module of the repo,
# structured and contextual logging in the main module (logcheck).
# It changes nothing; it prints what is wrong and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
# files PATTERN...: tracked and new files of the work tree, without tracked files deleted in it
# (not yet committed), which gofmt and dirname would trip over.
files() {
  git ls-files --cached --others --exclude-standard -- "$@" | while IFS= read -r f; do
    if [[ -e $f ]]; then printf '%s\n' "$f"; fi
  done
}
modules=$(files '*go.mod' | xargs -n1 dirname | sort -u)

unformatted=$(files '*.go' | xargs -r gofmt -l)
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; fail=1
fi

for m in $modules; do
  echo "== $m: go vet, go mod tidy -diff"
  # The local-cluster tools module compiles k8s.io/kubernetes (~20 min cold); `make e2e-local`
  # builds it, so vetting it here would only double that.
  # Tool-only modules (a go.mod with `tool` lines) have no packages of their own to vet.
  # The upstream storage e2e module is one test file over k8s.io/kubernetes/test/e2e: vetting
  # it computes vet facts of its ~2,000 dependencies (10+ min on two cores); it is built (and
  # so type-checked) by make e2e-upstream.
  if [[ "$m" != tests/e2e/localcluster/tools && "$m" != tests/e2e/upstream ]] && (cd "$m" && go list ./... 2>/dev/null | grep -q .); then
    (cd "$m" && go vet ./...) || fail=1
  fi
  (cd "$m" && go mod tidy -diff) || { echo "$m: go.mod/go.sum not tidy (run: cd $m && go mod tidy)"; fail=1; }
done

# Structured, contextual klog in the main module: logcheck (sigs.k8s.io/logtools, pinned in
# tools/go.mod) with the checks of Kubernetes' contextual-logging components; per-file
# exemptions in hack/logcheck.conf. Run standalone rather than as a go vet -vettool: that would
# cache its results across runs, but costs ~3x the CPU on a cold cache (it visits every
# dependency) and would not see a change of the config file.
echo "== .: logcheck"
go tool -modfile=tools/go.mod logcheck -check-contextual -check-with-helpers -config=hack/logcheck.conf ./... || fail=1

# Programs we run but do not import live in tools/go.mod, never in the main module.
if grep -qE 'k8s.io/kubernetes |sigs.k8s.io/kind |csi-test/v5/cmd' go.mod; then
  echo "go.mod: a tool or k8s.io/kubernetes leaked into the main module"; fail=1
fi
# The package graph in docs/ is generated (make docs-graph).
if ! diff -q <(hack/pkggraph.sh -) docs/packages.md >/dev/null; then
  echo "docs/packages.md is stale (run: make docs-graph)"; fail=1
fi
exit $fail
