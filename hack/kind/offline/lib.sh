#!/usr/bin/env bash
# Shared by the offline kind scripts: the cache root and small helpers.
# shellcheck disable=SC2034 # used by the scripts that source this file
FAKECLOUD_CACHE=${FAKECLOUD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fakecloud-csi}

die() { echo "error: $*" >&2; exit 1; }

# step NAME: print a numbered progress line with the time since the script started.
step() { printf '\n== [%ds] %s\n' "$SECONDS" "$*"; }
