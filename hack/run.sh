#!/usr/bin/env bash
# `make run`: the fake cloud, one controller plugin and one node plugin per seeded instance, all
# as local processes (no Kubernetes), started by hack/runstack (the start-up steps of
# internal/stack, shared with tests/teststack and the local cluster). Prints where
# everything listens and curl lines, shows NodeGetInfo move when capacity changes, then keeps
# running until Ctrl-C.
#   RUN_DIR=/tmp/x make run          keep state and logs there (default: a new temp dir); run
#                                    again with the same RUN_DIR to go on from that state
#   FAKECLOUD_PORT=8080              the fake cloud's port on 127.0.0.1
#   DRIVER_HTTP_PORT_BASE=9808       the controller's HTTP port; node plugins take the next ones
#   DEMO=0                           skip the before/after demo (it changes the fake cloud's
#                                    state and resets it: skipped by default when RUN_DIR holds
#                                    an earlier run's store; DEMO=1 runs it anyway)
#   EXIT_AFTER_DEMO=1                stop after the demo (.ci/run uses this to prove `make run`)
#   SEED=examples/seed.yaml          the fake cloud's seed (instances, quotas, faults)
#   TOKENS=examples/tokens.yaml      its tokens (must hold demo-driver-token and demo-admin-token)
#   VERBOSITY=4                      klog -v of every process (4: the fake cloud logs each request)
#   FAKECLOUD_ARGS='--max-events=100' DRIVER_ARGS='--capacity-stability-window=5s'
#                                    extra flags for the fake cloud / every driver process
#   FOLLOW=0                         after the demo, do not show the fake cloud's requests and
#                                    fault firings and the plugins' capacity changes here
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
SEED=${SEED:-examples/seed.yaml}
TOKENS=${TOKENS:-examples/tokens.yaml}
PORT=${FAKECLOUD_PORT:-8080}
HTTP_BASE=${DRIVER_HTTP_PORT_BASE:-9808}
# The ports first, before anything is built or created: a typo must not cost a build, and a
# port taken by another make run must be said before the binaries are compiled.
for v in FAKECLOUD_PORT:$PORT DRIVER_HTTP_PORT_BASE:$HTTP_BASE; do
  val=${v#*:}
  if ! [[ $val =~ ^[0-9]{1,5}$ ]] || ((10#$val < 1 || 10#$val > 65535)); then
    echo "${v%%:*}=$val: want a port number from 1 to 65535" >&2; exit 1
  fi
done
PORT=$((10#$PORT)) HTTP_BASE=$((10#$HTTP_BASE))
port_in_use() { (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ports_free() { # ports_free PORT...: fail, naming every port in use, if any is
  local busy=() p
  for p in "$@"; do port_in_use "$p" && busy+=("$p"); done
  [[ ${#busy[@]} -eq 0 ]] && return 0
  echo "port$([[ ${#busy[@]} -gt 1 ]] && echo s) ${busy[*]} in use (fake cloud $PORT, driver HTTP $HTTP_BASE and up): another make run may be running (Ctrl-C it), or set FAKECLOUD_PORT and DRIVER_HTTP_PORT_BASE" >&2
  return 1
}
# Before the build the number of node plugins is known only from a binary built earlier.
n_known=0
if [[ -x "$BIN/fakecloud" ]]; then n_known=$("$BIN/fakecloud" seed instances "$SEED" 2>/dev/null | grep -c . || true); fi
ports_free "$PORT" $(seq "$HTTP_BASE" $((HTTP_BASE + n_known))) || exit 1
# BUILD is the command that builds $BIN/fakecloud and $BIN/driver (make run passes `make
# build`); empty: they are built already. The launcher that starts them (hack/runstack: the
# stack's start-up steps of internal/stack) is built beside them; a no-op when up to date.
if [[ -n "${BUILD:-}" ]]; then $BUILD; fi
"${GO:-go}" build -o "$BIN/runstack" ./hack/runstack
own_run_dir=0
if [[ -z "${RUN_DIR:-}" ]]; then RUN_DIR=$(mktemp -d -t fakecloud-csi-run.XXXXXX); own_run_dir=1; fi
CLOUD="http://127.0.0.1:${PORT}"
ADMIN=demo-admin-token
# A RUN_DIR whose fake cloud store exists already is a restart: the store keeps what the last
# run left (instances, quotas, volumes, attachments; the seed is then only what POST
# /v1/reset returns to), and so do the plugins' state dirs. The demo would change that state
# and end with POST /v1/reset, so a restart skips it unless DEMO=1 asks for it.
restart=0
if [[ -d "$RUN_DIR/cloud" && -n "$(ls -A "$RUN_DIR/cloud" 2>/dev/null)" ]]; then restart=1; fi
demo=${DEMO:-$((1 - restart))}
mkdir -p "$RUN_DIR/logs"

read -r -a fakecloud_args <<<"${FAKECLOUD_ARGS:-}"
read -r -a driver_args <<<"${DRIVER_ARGS:-}"
if [[ -n "${VERBOSITY:-}" ]]; then
  fakecloud_args+=("-v=$VERBOSITY")
  driver_args+=("--v=$VERBOSITY")
fi

# pids: the launcher (hack/runstack, which starts and stops the components) and the log
# follower.
pids=()
stopped=0
up=0 # 1 once every component answers: from then on RUN_DIR is kept whatever happens
reported=0 # 1 once the launcher said why it failed (with the end of the logs of what exited)
cleanup() {
  local rc=$?
  # A second signal must not cut the clean-up short: `make` forwards SIGTERM to this script,
  # so a TERM sent to the whole process group arrives twice, and the INT/TERM trap's exit
  # would end this function before it said where the state stays.
  trap '' INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "$RUN_DIR/follow.fifo" "$RUN_DIR/logs/runstack.up"
  if [[ ${#pids[@]} -eq 0 && $own_run_dir -eq 1 ]]; then
    rm -rf "$RUN_DIR" # nothing was started: nothing to keep
  elif [[ $stopped -eq 1 ]]; then
    echo "stopped; state and logs stay in $RUN_DIR (RUN_DIR=$RUN_DIR make run goes on from this state)"
  elif [[ $rc -ne 0 && ${#pids[@]} -gt 0 ]]; then # before any process started, the message above says it all
    [[ $reported -eq 1 ]] || echo "run.sh failed; logs in $RUN_DIR/logs" >&2
    if [[ $up -eq 0 && $own_run_dir -eq 1 ]]; then
      rm -rf "$RUN_DIR" # a start that failed leaves nothing to go on from
      echo "(start-up failed: removed $RUN_DIR)" >&2
    else
      echo "(every log, with the state: $RUN_DIR/logs)" >&2
    fi
  fi
}
trap cleanup EXIT
# Ctrl-C is how `make run` is meant to end: stop everything and exit 0.
trap 'stopped=1; exit 0' INT TERM

# The seed's instances, read by the fake cloud's own parser and checks (any YAML style).
seed_ids=$("$BIN/fakecloud" seed instances "$SEED") || { echo "$SEED: not a seed the fake cloud accepts (above)" >&2; exit 1; }
mapfile -t nodes <<<"$seed_ids"
if [[ -z "${nodes[0]:-}" ]]; then
  echo "$SEED seeds no instances: make run starts one node plugin per seeded instance" >&2; exit 1
fi
for n in "${nodes[@]}"; do # the fake cloud takes any printable ID; make run puts them in URLs and paths unescaped
  [[ $n =~ ^[A-Za-z0-9._-]+$ ]] || { echo "$SEED: instance ID \"$n\": make run needs IDs of letters, digits, '.', '_' and '-' (it puts them in curl URLs and folder names)" >&2; exit 1; }
  # Each node plugin's state folder is $RUN_DIR/$n and its log logs/$n.log, beside make run's own.
  case $n in
    . | .. | cloud | controller | driver-token | fakecloud | follow.fifo | logs) echo "$SEED: instance ID \"$n\": make run names its own folders and logs so; rename the instance" >&2; exit 1 ;;
  esac
done
if ((HTTP_BASE + ${#nodes[@]} > 65535)); then
  echo "DRIVER_HTTP_PORT_BASE=$HTTP_BASE: the controller and ${#nodes[@]} node plugins need ports $HTTP_BASE-$((HTTP_BASE + ${#nodes[@]})), past 65535" >&2; exit 1
fi
ports_free "$PORT" $(seq "$HTTP_BASE" $((HTTP_BASE + ${#nodes[@]}))) || exit 1

# Logs are appended to: a restart keeps the earlier run's, after a line that says so.
for f in fakecloud controller "${nodes[@]}"; do
  echo "==== hack/run.sh started $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$RUN_DIR/logs/$f.log"
done
# The launcher starts the fake cloud, checks the tokens the plugins and the demo use, starts
# the controller and a node plugin per instance, and creates runstack.up once all are ready;
# it says itself why a start failed. The console (GET /ui) plots each node plugin's
# /debug/capacity; VERBOSITY is in the extra flags already.
launch_args=(--bin="$BIN" --run-dir="$RUN_DIR" --seed="$SEED" --tokens="$TOKENS" --port="$PORT"
  --http-base="$HTTP_BASE" --up-file="$RUN_DIR/logs/runstack.up")
((restart == 0)) || launch_args+=(--restart)
for n in "${nodes[@]}"; do launch_args+=(--node="$n"); done
for a in "${fakecloud_args[@]}"; do launch_args+=(--fakecloud-arg="$a"); done
for a in "${driver_args[@]}"; do launch_args+=(--driver-arg="$a"); done
"$BIN/runstack" "${launch_args[@]}" &
launcher=$!
pids+=("$launcher")
until [[ -e "$RUN_DIR/logs/runstack.up" ]]; do
  if ! kill -0 "$launcher" 2>/dev/null; then
    rc=0
    wait "$launcher" || rc=$?
    ((rc == 0)) && { stopped=1; exit 0; } # stopped on a signal
    reported=1
    exit 1
  fi
  sleep 0.1
done
rm -f "$RUN_DIR/logs/runstack.up"

up=1
cat <<INFO

fakecloud-csi is running (state and logs: $RUN_DIR)
  console            $CLOUD/ui#token=$ADMIN   (open in a browser: slots, quotas, faults, events, each plugin's value live)
  fake cloud         $CLOUD   tokens: admin=$ADMIN driver=demo-driver-token reader=demo-reader-token
  controller plugin  unix://$RUN_DIR/controller/csi.sock   http://127.0.0.1:$HTTP_BASE/metrics
INFO
port=$HTTP_BASE
for n in "${nodes[@]}"; do
  port=$((port + 1))
  echo "  node plugin $n  unix://$RUN_DIR/$n/csi.sock   http://127.0.0.1:$port/debug/capacity"
done
watch_urls=()
for i in "${!nodes[@]}"; do watch_urls+=("http://127.0.0.1:$((HTTP_BASE + i + 1))"); done
echo "  watch              $BIN/driver watch ${watch_urls[*]}   (one line per node a second: reported, target, mode, the cloud's facts)"
n0=${nodes[0]}
cat <<CURL

Try:
  curl -s -H 'Authorization: Bearer demo-reader-token' $CLOUD/v1/instances/$n0/capacity
  curl -s -H 'Authorization: Bearer demo-reader-token' $CLOUD/metrics   (a reader token, unless fakecloud runs with --metrics-open)
  curl -s -X PATCH -H 'Authorization: Bearer $ADMIN' -d '{"outOfBandSlots": 2}' $CLOUD/v1/instances/$n0
  curl -s -X PATCH -H 'Authorization: Bearer $ADMIN' -d '{"attachments": 0}' $CLOUD/v1/quotas
  curl -s -X POST  -H 'Authorization: Bearer $ADMIN' -d '{"operation":"AttachVolume","error":"Throttled"}' $CLOUD/v1/faults
  $BIN/driver nodeinfo --endpoint=unix://$RUN_DIR/$n0/csi.sock
CURL

nodeinfo() { "$BIN/driver" nodeinfo --endpoint="unix://$RUN_DIR/$1/csi.sock"; }
if [[ $demo == 1 ]]; then
  n1=${nodes[1]:-$n0}
  echo; echo "== Demo: NodeGetInfo of $n1 before, then with 3 slots taken out of band (its boot disk, as seeded, and 2 more)"
  nodeinfo "$n1"
  curl -fsS -X PATCH -H "Authorization: Bearer $ADMIN" -d '{"outOfBandSlots": 3}' "$CLOUD/v1/instances/$n1" >/dev/null
  sleep 1.5 # the node plugin looks the cloud up at most once per --capacity-min-interval (1s here)
  echo "== after PATCH /v1/instances/$n1 {\"outOfBandSlots\": 3}:"
  nodeinfo "$n1"
  curl -fsS -X PATCH -H "Authorization: Bearer $ADMIN" -d '{"attachments": 0}' "$CLOUD/v1/quotas" >/dev/null
  sleep 1.5
  echo "== after PATCH /v1/quotas {\"attachments\": 0} (no headroom: the count falls to the floor, 1, never 0):"
  nodeinfo "$n1"
  curl -fsS -X POST -H "Authorization: Bearer $ADMIN" "$CLOUD/v1/reset" >/dev/null
  echo "== POST /v1/reset: back to the seed. Decreases apply at once; increases wait for"
  echo "   --capacity-stability-window (30s) and ramp by --capacity-max-step (2) per refresh,"
  echo "   so $n1 climbs back to its first value above over the next minute or so (watch /debug/capacity)."
elif [[ $restart -eq 1 && -z "${DEMO:-}" ]]; then
  echo; echo "== No demo: it would change this state and reset it to the seed (DEMO=1 runs it anyway)."
fi
if [[ "${EXIT_AFTER_DEMO:-0}" == 1 ]]; then
  echo; echo "EXIT_AFTER_DEMO=1: stopping; state and logs stay in $RUN_DIR (RUN_DIR=$RUN_DIR make run goes on from this state)"
  stopped=2 # cleanup: said already
  exit 0
fi

# show_logs copies, from now on, what the processes log that a watcher wants to see: every line
# of the fake cloud (at the default verbosity it bounds itself: one line per change, error or
# fault firing, at most 10 a second, reads summed up every 10 s
# when a period had more than reads) and the plugins' capacity
# changes and errors, each prefixed with its process. Everything stays in the logs too. It reads
# tail's output through a FIFO so that tail and it are this script's own children, which
# cleanup stops (a background pipeline's tail would ignore Ctrl-C and outlive the script); a
# bash loop rather than awk, which may read a pipe in blocks and show lines late.
show_logs() {
  local line f=""
  while IFS= read -r line; do
    case $line in
      "==> "*" <==")
        f=${line#==> }; f=${f% <==}; f=${f##*/}; f=${f%.log}
        [[ $f == fakecloud || $f == controller ]] || f="plugin $f" # a node plugin's log is <node>.log
        continue ;;
      "") continue ;;
    esac
    # The build stamp every fake cloud line carries: in the log, not on the screen.
    if [[ $line =~ ^(.*)\ version=\"[^\"]*\"\ commit=\"[^\"]*\"(.*)$ ]]; then line=${BASH_REMATCH[1]}${BASH_REMATCH[2]}; fi
    if [[ $f == fakecloud || $line == *'"Capacity '* || $line =~ ^[EW][0-9]{4}\  ]]; then
      printf '%-16s %s\n' "$f" "$line"
    fi
  done
}
echo
if [[ "${FOLLOW:-1}" == 1 ]]; then
  echo "Following the fake cloud's requests and fault firings and the plugins' capacity changes (FOLLOW=0: quiet; all in $RUN_DIR/logs)."
  rm -f "$RUN_DIR/follow.fifo" && mkfifo "$RUN_DIR/follow.fifo"
  show_logs <"$RUN_DIR/follow.fifo" &
  pids+=($!)
  tail -n 0 -F "$RUN_DIR"/logs/*.log >"$RUN_DIR/follow.fifo" 2>/dev/null &
  pids+=($!)
fi
echo "Press Ctrl-C to stop."
# Until Ctrl-C, or until a component exits: a run whose fake cloud or plugin died must not go on
# looking alive (a plain wait would also wait for the log follower, which never ends). The
# launcher then says which exited and stops the others: exit 0 is a stop on a signal (one
# that reached the components but not this script, which ignores SIGINT when started as a
# background job: bash cannot trap a signal ignored at its start), 1 a failure it reported.
rc=0
wait "$launcher" || rc=$?
if [[ $rc -eq 0 ]]; then
  stopped=1
  exit 0
fi
reported=1
exit 1
