# shellcheck shell=bash
# Sourced by the hack/ scripts that need a throwaway fake cloud on loopback.
#
# start_fakecloud LOG [FLAG...] starts "$BIN/fakecloud" on 127.0.0.1:0 (the kernel picks a free
# port, so two runs on one machine cannot race for it), waits until /readyz answers, and sets
# FAKECLOUD_URL (http://127.0.0.1:PORT) and FAKECLOUD_PID. It returns 1, with the log on stderr
# and the process stopped, when the process exits or is not ready within FAKECLOUD_START_TIMEOUT
# seconds (default 60: on a CI disk busy with the test cache, fsync can stall for seconds).
start_fakecloud() {
  local log=$1; shift
  "${BIN:-bin}/fakecloud" --listen=127.0.0.1:0 "$@" >"$log" 2>&1 &
  FAKECLOUD_PID=$!
  FAKECLOUD_URL=
  local deadline=$((SECONDS + ${FAKECLOUD_START_TIMEOUT:-60}))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$FAKECLOUD_PID" 2>/dev/null; then
      echo "fakecloud exited during start-up; its log:" >&2; cat "$log" >&2; return 1
    fi
    if [[ -z "$FAKECLOUD_URL" ]]; then
      FAKECLOUD_URL=$(sed -nE 's/.*"Fake cloud listening".* address="([^"]+)".*/\1/p' "$log" | head -n 1)
    fi
    if [[ -n "$FAKECLOUD_URL" ]] && curl -fsS "$FAKECLOUD_URL/readyz" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  kill "$FAKECLOUD_PID" 2>/dev/null || true
  echo "fakecloud not ready after ${FAKECLOUD_START_TIMEOUT:-60}s; its log:" >&2; cat "$log" >&2
  return 1
}
