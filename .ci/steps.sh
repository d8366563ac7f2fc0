# shellcheck shell=bash
# .ci/steps.sh, sourced by .ci/run: its foreground steps, its background jobs and the table of
# both that ends its output (the EXIT trap, also on failure or interruption). .ci/steps_test.sh
# runs it with dummy steps and jobs.
#
# On 2 cores the time to win is where a step mostly waits (clusters converging, pods attaching,
# real components' periods): a CPU-bound build runs there, under it, in the background. Only
# builds go to the background, never tests (tests under tests was measured slower and starved
# their timing checks: docs/figures.md#ci-run), and at nice 19, so that the foreground's
# components keep the cores whenever they want them.

# step COMMAND...: run it in the foreground and say how long it took; the table at the end (also
# on failure or interruption: the EXIT trap) lists every step with its seconds and the running
# total. After each step, one line per background job still running (see background below).
steps=() secs=() ci_start=$(date +%s) current=
step() {
  local start; start=$(date +%s)
  step_start=$start current="$*"
  echo "== $*"
  "$@"
  steps+=("$*") secs+=($(( $(date +%s) - start )))
  current=
  echo "== $* took ${secs[-1]}s"
  bg_progress
}

# background NAME COMMAND...: start COMMAND as job NAME, output to _output/ci-NAME.log (each
# build there prints its own progress lines), in its own session so that the EXIT trap can stop
# it with all its children. wait_for NAME (a step): wait for it, a line every 30 s; a job that
# failed fails the run with its log's tail, whether seen by wait_for or after any step.
bg_names=() bg_pids=() bg_cmds=() bg_starts=() bg_secs=() bg_status=()
background() {
  local name=$1; shift
  local log=_output/ci-$name.log
  echo "== background $name: $* (nice 19, log $log)"
  # It writes its end time itself: its wait_for may come long after it ended, and its seconds
  # are its own, not the wait's.
  # Its own session is its own scheduler autogroup where the kernel has them on (Debian's
  # default: sched_autogroup_enabled=1): nice then ranks only within the group, and every group
  # gets an equal share, so a build "at nice 19" would take as much CPU as the kind suite. The
  # job gives its autogroup nice 19 too (/proc/self/autogroup; nothing where there is none).
  # shellcheck disable=SC2016 # expanded by the job's bash
  nice -n 19 setsid bash -c '{ echo 19 >/proc/self/autogroup; } 2>/dev/null; "$@"; rc=$?; date +%s >"$0"; exit $rc' \
    "_output/ci-$name.end" "$@" \
    >"$log" 2>&1 </dev/null &
  bg_names+=("$name") bg_pids+=($!) bg_cmds+=("$*") bg_starts+=("$(date +%s)") bg_secs+=(0) bg_status+=(running)
}
bg_index() {
  local i
  for i in "${!bg_names[@]}"; do
    if [[ ${bg_names[i]} == "$1" ]]; then echo "$i"; return 0; fi
  done
  echo "no background job named $1" >&2
  return 1
}
bg_line() { # what job I is doing: its seconds so far and its log's last line
  echo "== background ${bg_names[$1]}: $(( $(date +%s) - bg_starts[$1] ))s so far; $(tail -n 1 "_output/ci-${bg_names[$1]}.log" 2>/dev/null | cut -c1-140)"
}
# bg_reap I: job I has ended; record its seconds and status. Non-zero (after printing the end
# of its log) when it failed.
bg_reap() {
  local i=$1 rc=0 log=_output/ci-${bg_names[$1]}.log
  wait "${bg_pids[i]}" || rc=$?
  # Its own end, recorded by the job; now when that record is missing or not a number (the job
  # was killed, or a full disk left the file empty).
  local end; end=$(cat "_output/ci-${bg_names[i]}.end" 2>/dev/null) || true
  [[ $end =~ ^[0-9]+$ ]] || end=$(date +%s)
  bg_secs[i]=$(( end - bg_starts[i] ))
  if ((rc == 0)); then
    bg_status[i]=ok
    echo "== background ${bg_names[i]} done in ${bg_secs[i]}s"
    return 0
  fi
  bg_status[i]="FAILED, exit $rc"
  echo "== background ${bg_names[i]} FAILED (exit $rc) after ${bg_secs[i]}s: ${bg_cmds[i]}; the end of $log:"
  tail -n 40 "$log" | sed 's/^/  | /'
  return 1
}
bg_progress() {
  local i
  for i in "${!bg_names[@]}"; do
    [[ ${bg_status[i]} == running ]] || continue
    if kill -0 "${bg_pids[i]}" 2>/dev/null; then
      bg_line "$i"
    else
      bg_reap "$i" || exit 1 # failed while the foreground ran: stop here, not at its wait
    fi
  done
}
wait_for() {
  local i n=0; i=$(bg_index "$1")
  if [[ ${bg_status[i]} != running ]]; then # reaped after an earlier step
    [[ ${bg_status[i]} == ok ]]; return
  fi
  while kill -0 "${bg_pids[i]}" 2>/dev/null; do
    sleep 1
    if (( ++n % 30 == 0 )); then bg_line "$i"; fi
  done
  bg_reap "$i"
}

# ci_cleanup: what the caller stops before the table (default: nothing); the jobs are stopped.
if ! declare -F ci_cleanup >/dev/null; then ci_cleanup() { :; }; fi
step_table() {
  local rc=$? i total=0
  if [[ -n $current ]]; then # the step that failed or was interrupted
    steps+=("$current (FAILED, exit $rc)") secs+=($(( $(date +%s) - ${step_start:-$ci_start} )))
  fi
  for i in "${!bg_names[@]}"; do # jobs not waited for: the run ended before their wait_for
    [[ ${bg_status[i]} == running ]] || continue
    if kill -0 "${bg_pids[i]}" 2>/dev/null; then # stop it and all its children
      kill -TERM -- "-${bg_pids[i]}" 2>/dev/null || kill -TERM "${bg_pids[i]}" 2>/dev/null || true
      bg_secs[i]=$(( $(date +%s) - bg_starts[i] )) bg_status[i]="stopped unfinished"
    else
      bg_reap "$i" || true
    fi
  done
  ci_cleanup
  echo "== step times"
  printf '%8s %8s  %s\n' seconds total step
  for i in "${!steps[@]}"; do
    total=$((total + secs[i]))
    printf '%8d %8d  %s\n' "${secs[i]}" "$total" "${steps[i]}"
  done
  if ((${#bg_names[@]})); then
    echo "== background jobs (nice 19, each under the steps from its start to its wait_for: overlapped, not in the total)"
    for i in "${!bg_names[@]}"; do
      printf '%8d %8s  %s (%s; log _output/ci-%s.log)\n' "${bg_secs[i]}" "" "${bg_names[i]}: ${bg_cmds[i]}" \
        "${bg_status[i]}" "${bg_names[i]}"
    done
  fi
  printf '%8s %8d  %s\n' "" $(( $(date +%s) - ci_start )) "(whole run, set-up included)"
}
