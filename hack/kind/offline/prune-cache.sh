#!/usr/bin/env bash
# hack/kind/offline/prune-cache.sh CACHE KEEP...: after node-image.sh has written the current
# key's entries, remove those of older keys, and say what went and how much that freed. Every
# input change (a version, a script edit) gives the steps a new key; nothing removed the old
# entries, and ~/.cache/fakecloud-csi/kind grew by about 1 GB a change (a 766 MB node image
# archive, 155 MB of component images, the tools): 10 node images, 9.6 GB on one machine.
#   CACHE  node-image.sh's cache folder ($FAKECLOUD_CACHE/kind)
#   KEEP   the current entries: file names in CACHE (tools-KEY, images-KEY,
#          rootfs-SUITE-KEY.tar, kind-node-VERSION-KEY.tar) and Docker image references
#          (localhost/fakecloud-csi/kind-base:..., kind-node:...), which stay
# Removed: the finished entries of those four kinds in CACHE not in KEEP, and, when `docker`
# answers, the images of localhost/fakecloud-csi/kind-base and kind-node not in KEEP (docker
# rmi without -f: an image a container still uses, a kind cluster's node, stays). Never
# touched: what a build is writing (NAME.tmp, tools-KEY/bin.tmp, *-work.*: a build writes
# there and renames), hack-bin, node-image, node-image.env and logs. It takes CACHE/.build.lock exclusively
# without waiting (node-image.sh holds it shared while it builds): when another build runs,
# it removes nothing and says so; that build's end prunes instead.
set -euo pipefail
(($# >= 1)) || { echo "usage: $0 CACHE KEEP..." >&2; exit 2; }
cache=$1
shift
[[ -d $cache ]] || { echo "prune-cache: no folder $cache" >&2; exit 2; }
declare -A keep=()
for k in "$@"; do keep[$k]=1; done

exec {lock}>>"$cache/.build.lock"
if ! flock -n -x "$lock"; then
  echo "cache: another node-image build is running: older keys' entries left for it to prune"
  exit 0
fi

# human BYTES: "1.2 GB", "155 MB", "12 KB".
human() { awk -v b="$1" 'BEGIN { if (b >= 1e9) printf "%.1f GB", b/1e9; else if (b >= 1e6) printf "%d MB", b/1e6; else printf "%d KB", b/1e3 }'; }

freed=0 n=0
shopt -s nullglob
for e in "$cache"/tools-* "$cache"/images-* "$cache"/rootfs-*.tar "$cache"/kind-node-*.tar; do
  b=${e##*/}
  [[ -n ${keep[$b]:-} ]] && continue
  # Only a finished entry of a key; anything else (NAME.tmp being written) is not ours to judge.
  [[ $b =~ ^(tools-[0-9a-f]{12}|images-[0-9a-f]{12}|rootfs-[a-z]+-[0-9a-f]{12}\.tar|kind-node-v[0-9][0-9.]*-[0-9a-f]{8}\.tar)$ ]] || continue
  # The tools step writes inside its folder (tools-KEY/bin.tmp, renamed to bin when done).
  [[ $b == tools-* && -e $e/bin.tmp ]] && continue
  size=$(du -sb "$e" | cut -f1)
  rm -rf -- "$e"
  echo "  removed $e ($(human "$size"))"
  freed=$((freed + size)) n=$((n + 1))
done

imgs=0 imgbytes=0
if command -v docker >/dev/null 2>&1 && docker version >/dev/null 2>&1; then
  while read -r ref; do
    [[ -z $ref || -n ${keep[$ref]:-} ]] && continue
    size=$(docker image inspect -f '{{.Size}}' "$ref" 2>/dev/null || echo 0)
    if docker rmi "$ref" >/dev/null 2>&1; then
      echo "  removed image $ref (up to $(human "$size"): layers it shares stay)"
      imgs=$((imgs + 1)) imgbytes=$((imgbytes + size))
    else
      echo "  kept image $ref: in use (a container of it, a kind cluster's node, still exists)"
    fi
  done < <(docker image ls --format '{{.Repository}}:{{.Tag}}' localhost/fakecloud-csi/kind-base
    docker image ls --format '{{.Repository}}:{{.Tag}}' localhost/fakecloud-csi/kind-node)
fi

if ((n == 0 && imgs == 0)); then
  echo "cache: nothing of older keys to remove in $cache"
else
  echo "cache: removed $n entries of older keys in $cache, freed $(human "$freed"); $imgs older images in the Docker engine (up to $(human "$imgbytes"))"
fi
