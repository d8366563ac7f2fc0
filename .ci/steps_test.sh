#!/usr/bin/env bash
# .ci/steps_test.sh: .ci/steps.sh (step, background, wait_for, the table) with dummy steps and
# jobs, each scenario a script of its own in a temporary folder; seconds, no root, no network.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d -t ci-steps-test.XXXXXX)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$tmp"' EXIT
fails=0

# scenario NAME WANT_RC BODY: run BODY after sourcing steps.sh, as .ci/run does; its output in
# $tmp/NAME/out and its exit status checked.
scenario() {
  local name=$1 want=$2 body=$3 rc=0
  mkdir -p "$tmp/$name/_output"
  printf 'set -euo pipefail\nsource %q\ntrap step_table EXIT\n%s\n' "$here/steps.sh" "$body" >"$tmp/$name/run"
  (cd "$tmp/$name" && bash run) >"$tmp/$name/out" 2>&1 || rc=$?
  if [[ $rc != "$want" ]]; then
    echo "FAIL $name: exit $rc, want $want"; sed 's/^/  | /' "$tmp/$name/out"; fails=$((fails + 1))
  fi
}
# expect NAME REGEX: the scenario's output has a line matching REGEX (grep -E).
expect() {
  if ! grep -qE -- "$2" "$tmp/$1/out"; then
    echo "FAIL $1: no line matches: $2"; sed 's/^/  | /' "$tmp/$1/out"; fails=$((fails + 1))
  fi
}
# last NAME REGEX: the scenario's last line matches REGEX (the table ends the output).
last() {
  if ! tail -n 1 "$tmp/$1/out" | grep -qE -- "$2"; then
    echo "FAIL $1: last line is not: $2"; sed 's/^/  | /' "$tmp/$1/out"; fails=$((fails + 1))
  fi
}

# A job under a step, waited for: both in the table, the job apart, at nice 19, its own seconds.
scenario ok 0 '
background build bash -c "nice; sleep 2; echo built"
step sleep 1
step wait_for build
step true'
expect ok '^== background build: bash -c'
expect ok '^== background build: [0-9]+s so far; '
expect ok '^== background build done in [0-9]+s'
expect ok '^ +[0-9]+ +[0-9]+  wait_for build$'
expect ok '^== background jobs'
expect ok '^ +[23]  +build: bash -c nice; sleep 2; echo built \(ok; log _output/ci-build.log\)$'
last ok '\(whole run, set-up included\)$'
# nice -n 19 adds 19 to the caller's niceness (capped at 19): a run started at nice -10 gives 9.
want_nice=$(( $(nice) + 19 > 19 ? 19 : $(nice) + 19 ))
grep -qx "$want_nice" "$tmp/ok/_output/ci-build.log" ||
  { echo "FAIL ok: the job did not run at nice $want_nice (19 above the run's $(nice))"; fails=$((fails + 1)); }
# Where the kernel groups sessions (autogroup), the job's own session's group runs at nice 19 too.
if [[ -r /proc/self/autogroup ]]; then
  scenario autogroup 0 '
background grouped bash -c "cat /proc/self/autogroup"
step wait_for grouped'
  grep -q ' nice 19$' "$tmp/autogroup/_output/ci-grouped.log" ||
    { echo "FAIL autogroup: the job's autogroup is not at nice 19: $(cat "$tmp/autogroup/_output/ci-grouped.log")"; fails=$((fails + 1)); }
fi

# A job waited for long after it ended counts its own seconds, not the wait's.
scenario own-seconds 0 '
background quick true
step sleep 3
step wait_for quick'
expect own-seconds '^ +[01]  +quick: true \(ok;'

# A job whose end record is empty (a full disk) counts until its reaping, never a negative time.
scenario empty-end 0 '
background quick sleep 1
step bash -c "sleep 2; : >_output/ci-quick.end"
step wait_for quick'
expect empty-end '^ +[0-9]+  +quick: sleep 1 \(ok;'

# A job that fails while a step runs fails the run after that step, with its log's tail.
scenario fails-under-step 1 '
background bad bash -c "echo boom; exit 3"
step sleep 1
step echo never'
expect fails-under-step '^== background bad FAILED \(exit 3\)'
expect fails-under-step '^  \| boom$'
expect fails-under-step 'bad: bash -c echo boom; exit 3 \(FAILED, exit 3;'
last fails-under-step '\(whole run, set-up included\)$'
if grep -q '^never$' "$tmp/fails-under-step/out"; then echo "FAIL fails-under-step: a step ran after the failure"; fails=$((fails + 1)); fi

# A job that fails while wait_for waits: the wait_for step fails.
scenario fails-at-wait 1 '
background bad bash -c "sleep 2; echo boom; exit 4"
step wait_for bad
step echo never'
expect fails-at-wait '^  \| boom$'
expect fails-at-wait 'wait_for bad \(FAILED, exit 1\)$'
expect fails-at-wait '\(FAILED, exit 4;'
last fails-at-wait '\(whole run, set-up included\)$'

# A step that fails stops the jobs still running, children included, and says so.
scenario step-fails 1 '
background long bash -c "sleep 300 & echo \$! >child.pid; wait"
sleep 1
step false'
expect step-fails 'false \(FAILED, exit 1\)$'
expect step-fails 'long: .*\(stopped unfinished;'
last step-fails '\(whole run, set-up included\)$'
sleep 1
# alive: a process that is not a zombie (a killed child waits to be reaped by whoever adopted it)
alive() { [[ -r /proc/$1/stat ]] && ! awk '{exit !($3 == "Z")}' "/proc/$1/stat"; }
if alive "$(cat "$tmp/step-fails/child.pid")"; then
  echo "FAIL step-fails: the job's child still runs"; kill "$(cat "$tmp/step-fails/child.pid")"; fails=$((fails + 1))
fi

if ((fails)); then echo ".ci/steps_test.sh: $fails failed"; exit 1; fi
echo ".ci/steps_test.sh: ok"
