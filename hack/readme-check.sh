#!/usr/bin/env bash
# Runs every curl walkthrough of the docs against a fresh fake cloud seeded like `make run`, and
# checks that every line answers with the HTTP status its trailing "# NNN" comment promises, so
# the docs cannot drift from the API. A walkthrough is a block between
# <!-- curl-walkthrough:start --> and <!-- curl-walkthrough:end -->, in README.md or any
# docs/*.md (the README's second-terminal lines, docs/api-walkthrough.md's whole API). Each
# block starts from the seed (POST /v1/reset) and sets its own variables. Prints each line's
# status, then a count; fails when a line answers otherwise, when a file named in
# README_CHECK_REQUIRED has no block, or when no line ran at all. Then checks the docs' relative
# links (hack/doc-links.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
# Files that must hold a walkthrough: moving one without the other fails here, not silently.
README_CHECK_REQUIRED=${README_CHECK_REQUIRED:-README.md docs/api-walkthrough.md}
ADMIN_TOKEN=demo-admin-token # examples/tokens.yaml

files=(README.md)
for f in docs/*.md; do files+=("$f"); done

work=$(mktemp -d -t fakecloud-readme.XXXXXX)
FAKECLOUD_PID=
trap 'kill $FAKECLOUD_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=hack/lib/fakecloud.sh
source hack/lib/fakecloud.sh
start_fakecloud "$work/fakecloud.log" --seed=examples/seed.yaml --auth=tokens \
  --tokens-file=examples/tokens.yaml

fail=0 n=0 blocks=0
for f in "${files[@]}"; do
  # "LINENO<TAB>text" of every line inside a block; a line "@@" between blocks.
  lines=$(awk '/^<!-- curl-walkthrough:start -->$/{f=1; print "@@"; next}
               /^<!-- curl-walkthrough:end -->$/{f=0} f && !/^```/{print NR "\t" $0}' "$f")
  if [[ -z "$lines" ]]; then
    for r in $README_CHECK_REQUIRED; do
      [[ "$r" == "$f" ]] && { echo "$f has no curl walkthrough block" >&2; fail=1; }
    done
    continue
  fi
  while IFS= read -r entry; do
    if [[ "$entry" == "@@" ]]; then # a new block starts from the seed
      blocks=$((blocks + 1))
      curl -fsS -o /dev/null -X POST -H "Authorization: Bearer $ADMIN_TOKEN" "$FAKECLOUD_URL/v1/reset"
      continue
    fi
    lineno=${entry%%$'\t'*} line=${entry#*$'\t'}
    [[ -z "$line" || "$line" == \#* ]] && continue
    if [[ "$line" != curl* ]]; then # variable set-up lines and wait loops
      eval "${line//127.0.0.1:8080/${FAKECLOUD_URL#http://}}"
      continue
    fi
    want=$(sed -nE 's/.*# ([0-9]{3})( .*)?$/\1/p' <<<"$line")
    [[ -n "$want" ]] || { echo "$f:$lineno: no '# STATUS' comment on: $line" >&2; fail=1; continue; }
    cmd=${line%%#*}
    rm -f "$work/body"
    got=$(eval "$cmd -o $work/body -w '%{http_code}'") || true
    n=$((n + 1))
    short=$(sed -E 's/ +/ /g' <<<"$cmd")
    if [[ "$got" == "$want" ]]; then
      printf '%s:%s %s ok  %.90s\n' "$f" "$lineno" "$got" "$short"
    else
      printf '%s:%s %s, the doc says %s: %s\n' "$f" "$lineno" "$got" "$want" "$line" >&2
      if [[ -s "$work/body" ]]; then cat "$work/body" >&2; echo >&2; fi
      fail=1
    fi
  done <<<"$lines"
done
((n > 0)) || { echo "no curl walkthrough line found in README.md or docs/*.md" >&2; fail=1; }
if [[ $fail -eq 0 ]]; then
  echo "docs walkthroughs: $n curl lines in $blocks blocks answered as documented"
fi
hack/doc-links.sh || fail=1
exit $fail
