#!/usr/bin/env bash
# Runs the curl walkthrough of README.md against a fresh fake cloud seeded like `make run`, and
# checks that every line answers with the HTTP status its trailing "# NNN" comment promises,
# so the README cannot drift from the API.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}

block=$(awk '/<!-- curl-walkthrough:start -->/{f=1;next} /<!-- curl-walkthrough:end -->/{f=0} f' README.md |
  grep -v '^```')
[[ -n "$block" ]] || { echo "README.md has no curl walkthrough block" >&2; exit 1; }

work=$(mktemp -d -t fakecloud-readme.XXXXXX)
FAKECLOUD_PID=
trap 'kill $FAKECLOUD_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=hack/lib/fakecloud.sh
source hack/lib/fakecloud.sh
start_fakecloud "$work/fakecloud.log" --seed=examples/seed.yaml --auth=tokens \
  --tokens-file=examples/tokens.yaml

fail=0 n=0
while IFS= read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  if [[ "$line" != curl* ]]; then # variable set-up lines
    eval "${line//127.0.0.1:8080/${FAKECLOUD_URL#http://}}"
    continue
  fi
  want=$(sed -nE 's/.*# ([0-9]{3})( .*)?$/\1/p' <<<"$line")
  [[ -n "$want" ]] || { echo "no '# STATUS' comment on: $line" >&2; fail=1; continue; }
  cmd=${line%%#*}
  rm -f "$work/body"
  got=$(eval "$cmd -o $work/body -w '%{http_code}'") || true
  n=$((n + 1))
  if [[ "$got" != "$want" ]]; then
    echo "README line answered $got, README says $want: $line" >&2
    if [[ -s "$work/body" ]]; then cat "$work/body" >&2; echo >&2; fi
    fail=1
  fi
done <<<"$block"
[[ $fail -eq 0 ]] && echo "README walkthrough: $n curl lines answered as documented"
exit $fail
