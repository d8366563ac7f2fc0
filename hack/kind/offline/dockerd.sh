#!/usr/bin/env bash
# hack/kind/offline/dockerd.sh start|stop: a Docker engine for kind on a machine that has none
# running (CI, a fresh VM). `start` does nothing when `docker info` already answers; otherwise
# it starts Debian's dockerd in the background with its own data and exec roots, with
# capdrop-runc as the default runtime (some VMs lack CAP_SYS_RESOURCE in the bounding set, and
# runc then refuses every privileged container), and records the host's network state first.
# `stop` stops only the dockerd it started (by PID), removes the bridges it made and puts
# ip_forward and every iptables table back as they were. Needs root and the packages that
# hack/kind/offline/install-deps.sh installs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
# shellcheck source=hack/kind/offline/lib.sh
source "$here/lib.sh"

state=$FAKECLOUD_CACHE/docker
run=$state/run
pidfile=$run/dockerd.pid

start() {
  if docker info >/dev/null 2>&1; then
    echo "docker: an engine is already running; using it"
    return 0
  fi
  command -v dockerd >/dev/null || die "no dockerd: run hack/kind/offline/install-deps.sh (Debian's docker.io)"
  mkdir -p "$run" "$state/data" "$state/exec"
  # What the host looked like before Docker changed it.
  sysctl -n net.ipv4.ip_forward >"$run/ip_forward"
  ip -o link show type bridge | awk -F': ' '{print $2}' | sed 's/@.*//' | sort >"$run/bridges" || true
  for v in 4 6; do
    "$(ipt_save $v)" >"$run/iptables-v$v.rules" 2>/dev/null || : >"$run/iptables-v$v.rules"
  done
  local runtime=$state/bin/capdrop-runc
  mkdir -p "$state/bin"
  # Through hack/progress.sh: CI's first step starts here, on an empty Go build cache (the
  # standard library first: tens of seconds).
  (cd "$root/hack/kind" && CGO_ENABLED=0 "$root/hack/progress.sh" "go build capdrop-runc" \
    go build -v -trimpath -o "$runtime.tmp" ./cmd/capdrop-runc)
  mv "$runtime.tmp" "$runtime"
  cat >"$run/daemon.json" <<JSON
{
  "data-root": "$state/data",
  "exec-root": "$state/exec",
  "pidfile": "$pidfile",
  "hosts": ["unix:///var/run/docker.sock"],
  "storage-driver": "overlay2",
  "runtimes": {"capdrop": {"path": "$runtime"}},
  "default-runtime": "capdrop",
  "log-level": "warn"
}
JSON
  echo "docker: starting dockerd (data $state/data, log $run/dockerd.log)"
  # setsid: the engine must outlive this script and not die with the terminal's Ctrl-C.
  setsid dockerd --config-file "$run/daemon.json" >"$run/dockerd.log" 2>&1 </dev/null &
  echo $! >"$run/started.pid"
  local deadline=$((SECONDS + 60))
  until docker info >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$run/started.pid")" 2>/dev/null; then
      tail -n 30 "$run/dockerd.log" >&2
      die "dockerd exited; its log is $run/dockerd.log"
    fi
    ((SECONDS < deadline)) || { tail -n 30 "$run/dockerd.log" >&2; die "dockerd not ready in 60 s"; }
    sleep 1
  done
  echo "docker: ready (pid $(cat "$run/started.pid"), $(docker version --format '{{.Server.Version}}'))"
}

stop() {
  [[ -f $run/started.pid ]] || { echo "docker: no dockerd started by this script"; return 0; }
  local pid; pid=$(cat "$run/started.pid")
  # The engine is shared: the pid file stays from whichever run started it, and other users'
  # containers may run on it by now. Stop it only when nothing runs on it any more.
  local others
  others=$(docker ps -q 2>/dev/null | wc -l)
  if ((others > 0)) && [[ ${DOCKERD_STOP_FORCE:-0} != 1 ]]; then
    echo "docker: $others containers still run on the dockerd started here (pid $pid); leaving it running (DOCKERD_STOP_FORCE=1 stops it anyway)"
    return 0
  fi
  if kill -0 "$pid" 2>/dev/null && [[ "$(cat /proc/"$pid"/comm 2>/dev/null)" == dockerd ]]; then
    echo "docker: stopping dockerd (pid $pid)"
    kill "$pid"
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
  fi
  # containerd started by dockerd exits with it; its shims may linger for a moment.
  # Bridges Docker made (docker0, br-*) that were not there before.
  local now; now=$(ip -o link show type bridge | awk -F': ' '{print $2}' | sed 's/@.*//' | sort)
  for br in $(comm -13 "$run/bridges" <(echo "$now")); do
    case $br in docker0|br-*) ip link delete "$br" 2>/dev/null && echo "docker: removed bridge $br" ;; esac
  done
  for v in 4 6; do restore_tables "$v" "$run/iptables-v$v.rules"; done
  sysctl -qw net.ipv4.ip_forward="$(cat "$run/ip_forward")"
  rm -f "$run/started.pid"
  echo "docker: stopped; ip_forward and iptables as before"
}

ipt_save() { if [[ $1 == 4 ]]; then echo iptables-save; else echo ip6tables-save; fi; }
ipt() { if [[ $1 == 4 ]]; then echo iptables; else echo ip6tables; fi; }

# restore_tables V FILE: empty every table that exists now, then load what FILE saved. A table
# that FILE does not have did not exist before Docker: with iptables' nf_tables backend it is
# deleted too (nft delete table), so that not even an empty table is left behind.
restore_tables() {
  local v=$1 saved=$2 t cmd family
  cmd=$(ipt "$v")
  command -v "$cmd" >/dev/null || return 0
  family=ip; [[ $v == 6 ]] && family=ip6
  for t in $("$(ipt_save "$v")" 2>/dev/null | sed -n 's/^\*//p'); do
    "$cmd" -t "$t" -F 2>/dev/null || true
    "$cmd" -t "$t" -X 2>/dev/null || true
    for chain in INPUT FORWARD OUTPUT PREROUTING POSTROUTING; do
      "$cmd" -t "$t" -P "$chain" ACCEPT 2>/dev/null || true
    done
    if ! grep -qx "\*$t" "$saved" && command -v nft >/dev/null && "$cmd" --version | grep -q nf_tables; then
      nft delete table "$family" "$t" 2>/dev/null || true
    fi
  done
  [[ -s $saved ]] && "$cmd-restore" <"$saved"
  return 0
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop" ;;
esac
