#!/usr/bin/env bash
# hack/verify.sh [main|modules|all]: the gate before tests. It changes nothing; it prints what
# is wrong and exits non-zero.
#   main (default; make verify, make test): gofmt of every Go file of the repo; go vet and
#        go mod tidy -diff of the main module; structured and contextual logging in it
#        (logcheck); no tool in its go.mod; make help's lines under 100 columns;
#        docs/packages.md and the matrix of docs/errors.md current; golangci-lint (.golangci.yml).
#   modules: go vet and go mod tidy -diff of every other module (hack/kind, tests/e2e,
#        tests/browser, the tool modules, ...), and golangci-lint of those with packages:
#        make test-all, which CI runs.
#   LINT says who checks the code beyond gofmt, tidiness and logcheck (lint below):
#        1 (default): golangci-lint, whose govet runs go vet's analyzers (and nilness), so no
#          separate go vet; 0: go vet alone, no golangci-lint; auto (make test): golangci-lint
#          when bin/golangci-lint is built, else go vet; later (.ci/run): neither here, because
#          golangci-lint of every module runs after this in the same job (its background
#          `make lint` under the kind suite, which fails the run on a finding).
#   all (make verify-all): both.
# Each long step goes through hack/progress.sh: a line every 30 s, never minutes of silence.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scope=${1:-main}
case "$scope" in main | modules | all) ;; *) echo "usage: hack/verify.sh [main|modules|all]" >&2; exit 2 ;; esac
progress=$root/hack/progress.sh

fail=0
# files PATTERN...: tracked and new files of the work tree, without tracked files deleted in it
# (not yet committed), which gofmt and dirname would trip over.
files() {
  git ls-files --cached --others --exclude-standard -- "$@" | while IFS= read -r f; do
    if [[ -e $f ]]; then printf '%s\n' "$f"; fi
  done
}

# vet_tidy MODULE_DIR: download its dependencies (one line), go vet its packages (a progress line
# every 30 s while it compiles), check go.mod and go.sum are tidy.
vet_tidy() {
  local m=$1
  echo "== $m: go vet, go mod tidy -diff"
  "$root/hack/deps.sh" "$m"
  # The local-cluster tools module compiles k8s.io/kubernetes (~20 min cold); `make e2e-local`
  # builds it, so vetting it here would only double that.
  # Tool-only modules (a go.mod with `tool` lines) have no packages of their own to vet.
  # The upstream storage e2e module is one test file over k8s.io/kubernetes/test/e2e: vetting
  # it computes vet facts of its ~2,000 dependencies (10+ min on two cores); it is built (and
  # so type-checked) by make e2e-upstream.
  if [[ "$m" != tests/e2e/localcluster/tools && "$m" != tests/e2e/upstream ]] && (cd "$m" && go list ./... 2>/dev/null | grep -q .); then
    if vet_here; then
      echo "go vet ./... ($m)"
      (cd "$m" && "$progress" "go vet ($m)" go vet -v ./...) || fail=1
    else
      echo "go vet ./... ($m): not run separately; golangci-lint's govet has go vet's analyzers ($(lint_when))"
    fi
  fi
  # tidy loads the tests of dependencies too (for go.sum), so it may fetch a few more modules:
  # counted in one line instead of a `go: downloading` line each.
  local out rc=0 fetched
  out=$(cd "$m" && go mod tidy -diff 2>&1) || rc=$?
  fetched=$(grep -c '^go: downloading ' <<<"$out" || true)
  if [[ -n $out ]]; then grep -v '^go: downloading ' <<<"$out" || true; fi
  if ((rc != 0)); then
    echo "$m: go.mod/go.sum not tidy (run: cd $m && go mod tidy)"; fail=1
  elif ((fetched > 0)); then
    echo "go mod tidy -diff ($m): tidy ($fetched modules downloaded for it: tests of dependencies)"
  fi
}

# vet_here: whether go vet runs here, which is when golangci-lint does not (LINT above): its
# govet runs go vet's default analyzers (golangci-lint's list follows cmd/vet's), so both would
# only type-check and analyse every package and its dependencies twice (minutes, cold).
vet_here() {
  case ${LINT:-1} in
  0) return 0 ;;
  auto) [[ ! -x $root/bin/golangci-lint ]] ;;
  *) return 1 ;;
  esac
}

# lint_when: where golangci-lint runs, when it runs instead of go vet.
lint_when() {
  if [[ ${LINT:-1} == later ]]; then
    echo "LINT=later: it runs after this, .ci/run's make lint"
  else
    echo "it runs below"
  fi
}

# lint MODULE_DIR: golangci-lint (pinned in tools/golangci-lint/go.mod, built into bin/ on first
# use) with the repo's .golangci.yml on the module's packages: hack/lint.sh. LINT=0 and
# LINT=later skip it; LINT=auto (make test) lints only when bin/golangci-lint was built
# before, and otherwise says it skipped (go vet ran instead): its first build (~1,200
# packages) would not fit a newcomer's first make test.
lint() {
  case ${LINT:-1} in
  0 | later) ;;
  auto)
    if [[ -x $root/bin/golangci-lint ]]; then
      "$root/hack/lint.sh" "$1" || fail=1
    else
      echo "golangci-lint: not built yet, so SKIPPED here, go vet ran instead (make lint builds it," \
        "minutes the first time, then lints every module; make verify and make test-all never skip it)"
    fi
    ;;
  *) "$root/hack/lint.sh" "$1" || fail=1 ;;
  esac
}

if [[ $scope != modules ]]; then
  unformatted=$(files '*.go' | xargs -r gofmt -l)
  if [[ -n "$unformatted" ]]; then
    echo "gofmt would change:"; echo "$unformatted"; fail=1
  fi
  vet_tidy .

  # Structured, contextual klog in the main module: logcheck (sigs.k8s.io/logtools, pinned in
  # tools/go.mod) with the checks of Kubernetes' contextual-logging components; per-file
  # exemptions in hack/logcheck.conf. Run standalone rather than as a go vet -vettool: that would
  # cache its results across runs, but costs ~3x the CPU on a cold cache (it visits every
  # dependency) and would not see a change of the config file. Built to bin/ first so that its
  # compile shows progress (go tool compiles silently).
  echo "== .: logcheck"
  "$root/hack/deps.sh" tools
  echo "building bin/logcheck (tools/go.mod)"
  (cd tools && "$progress" "go build bin/logcheck" go build -v -o "$root/bin/logcheck" sigs.k8s.io/logtools/logcheck) || fail=1
  echo "running logcheck ./..."
  "$progress" -u '' "logcheck ./..." bin/logcheck -check-contextual -check-with-helpers -config=hack/logcheck.conf ./... || fail=1

  lint .

  # Programs we run but do not import live in tools/go.mod, never in the main module.
  if grep -qE 'k8s.io/kubernetes |sigs.k8s.io/kind |csi-test/v5/cmd|golangci-lint|gotestsum' go.mod; then
    echo "go.mod: a tool or k8s.io/kubernetes leaked into the main module"; fail=1
  fi
  # make help is a newcomer's first screen: a line each, under 100 columns (the details are in
  # docs/testing.md, "Targets in detail").
  long=$(make --no-print-directory help | awk 'length > 99')
  if [[ -n $long ]]; then
    echo "make help: lines over 99 columns (shorten their ## text; details go in docs/testing.md):"
    echo "$long"; fail=1
  fi
  # The package graph in docs/ is generated (make docs-graph).
  if ! diff -q <(hack/pkggraph.sh -) docs/packages.md >/dev/null; then
    echo "docs/packages.md is stale (run: make docs-graph)"; fail=1
  fi
  # So is the error matrix of docs/errors.md, from pkg/cloud's error tables (make docs-errors).
  echo "== .: docs/errors.md (TestErrorsDoc)"
  go test -run '^TestErrorsDoc$' ./pkg/cloud || { echo "docs/errors.md is stale (run: make docs-errors)"; fail=1; }
fi

if [[ $scope != main ]]; then
  for m in $(files '*go.mod' | xargs -n1 dirname | sort -u); do
    [[ $m == . ]] || vet_tidy "$m"
  done
  for m in $("$root/hack/lint.sh" -list); do
    [[ $m == . ]] || lint "$m"
  done
fi
if ((fail == 0)); then echo "verify ($scope): ok"; fi
exit $fail
