#!/usr/bin/env bash
# hack/lint.sh MODULE_DIR...: golangci-lint with the repo's .golangci.yml on each module's
# packages, a "== MODULE: golangci-lint" line each and a progress line every 30 s while it runs
# (hack/progress.sh: its findings are printed when it fails). golangci-lint is pinned in its own
# module, tools/golangci-lint/go.mod (its linters' exact versions, apart from the other tools'),
# and built into bin/ first: the first build compiles ~1,200 packages (docs/figures.md#golangci-lint),
# later ones take seconds. hack/verify.sh calls it.
# hack/lint.sh -list: the module dirs it lints by default: every one with packages of its own,
# but the local cluster's tools and the upstream e2e module (one test file and a build of
# k8s.io/kubernetes; make e2e-local-build and make e2e-upstream compile them, as for go vet).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
progress=$root/hack/progress.sh

if [[ ${1:-} == -list ]]; then
  git ls-files --cached --others --exclude-standard -- '*go.mod' | xargs -n1 dirname | sort -u |
    while IFS= read -r m; do
      case $m in tests/e2e/localcluster/tools | tests/e2e/upstream) continue ;; esac
      # Tool-only modules (a go.mod with `tool` lines) have no packages of their own.
      if (cd "$m" && go list ./... 2>/dev/null | grep -q .); then echo "$m"; fi
    done
  exit 0
fi
if (($# == 0)); then echo "usage: hack/lint.sh [-list | MODULE_DIR...]" >&2; exit 2; fi

"$root/hack/deps.sh" tools/golangci-lint
(cd tools/golangci-lint && "$progress" "go build bin/golangci-lint" \
  go build -v -o "$root/bin/golangci-lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
fail=0
for m in "$@"; do
  echo "== $m: golangci-lint"
  start=$SECONDS
  if (cd "$m" && "$progress" -u '' "golangci-lint ($m)" \
    "$root/bin/golangci-lint" run --config="$root/.golangci.yml" --show-stats=false ./...); then
    echo "golangci-lint ($m): no findings ($((SECONDS - start)) s)"
  else
    echo "golangci-lint ($m): findings above (fix them, or exclude one with its reason in .golangci.yml)"
    fail=1
  fi
done
exit $fail
