#!/usr/bin/env bash
# `make sanity`: the csi-sanity binary (tools/go.mod pins csi-test v5.6.0) against the built
# driver (--mode=all) and a real fake cloud on loopback, the way driver authors run it.
# Node specs bind-mount, which needs root; as another user they are skipped, and this says so.
# It runs twice: with mount volumes, then with block volumes (loop devices, also root only).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
case "$BIN" in /*) sanity=$BIN/csi-sanity ;; *) sanity=$PWD/$BIN/csi-sanity ;; esac
# Built to bin/ through hack/progress.sh: `go tool -modfile=tools/go.mod csi-sanity` would
# compile csi-test, ginkgo and gRPC silently on a first run (a minute or more on 2 cores).
(cd tools && ../hack/progress.sh "go build $BIN/csi-sanity" go build -v -o "$sanity" \
  github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity)
work=$(mktemp -d -t fakecloud-csi-sanity.XXXXXX)
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then echo "sanity failed; logs in $work" >&2; tail -n 30 "$work"/*.log >&2 || true
  else rm -rf "$work"; fi
}
trap cleanup EXIT

cat >"$work/seed.yaml" <<SEED
instanceTypes: [{name: sanity, maxAttachments: 6}]
instances: [{id: sanity-node, zone: zone-a, instanceType: sanity, outOfBandSlots: 1}]
quotas: {attachments: 1000, volumes: 10000, capacityBytes: 109951162777600}
SEED
printf '%s' demo-driver-token >"$work/token"
# csi-sanity's staging and target paths go in here, the driver's --kubelet-root (it refuses
# node paths outside it); csi-sanity makes only the last element of each path.
mkdir "$work/kubelet"

# shellcheck source=hack/lib/fakecloud.sh
source hack/lib/fakecloud.sh
start_fakecloud "$work/fakecloud.log" --seed="$work/seed.yaml" --auth=tokens \
  --tokens-file=examples/tokens.yaml || exit 1
pids+=("$FAKECLOUD_PID")
"$BIN/driver" --mode=all --node-id=sanity-node --endpoint="unix://$work/csi.sock" \
  --cloud-url="$FAKECLOUD_URL" --cloud-token-file="$work/token" --state-dir="$work/state" \
  --kubelet-root="$work/kubelet" --capacity-min-interval=10ms -v=2 >"$work/driver.log" 2>&1 &
pids+=($!)
ready=0
for _ in $(seq 1 300); do
  "$BIN/driver" probe --timeout=1s --endpoint="unix://$work/csi.sock" >/dev/null 2>&1 && { ready=1; break; }
  kill -0 "${pids[-1]}" 2>/dev/null || break
  sleep 0.2
done
[[ $ready -eq 1 ]] || { echo "the driver never answered Probe on $work/csi.sock" >&2; exit 1; }

skip=()
if [[ $(id -u) -ne 0 ]]; then
  echo "sanity: not root, so the Node Service specs (they bind-mount and attach loop devices) are skipped"
  skip=(--ginkgo.skip="Node Service")
fi
# A VolumeAttributesClass's parameters for the MODIFY_VOLUME specs, as deploy/kind's "fast" class.
printf 'type: ssd\niops: "3000"\n' >"$work/mutable.yaml"
for access in mount block; do
  echo "== csi-sanity with $access volumes"
  "$sanity" \
    --csi.endpoint="$work/csi.sock" \
    --csi.mountdir="$work/kubelet/target-$access" --csi.stagingdir="$work/kubelet/staging-$access" \
    --csi.testvolumeaccesstype="$access" \
    --csi.testnodevolumeattachlimit \
    --csi.testvolumemutableparameters="$work/mutable.yaml" \
    --ginkgo.no-color "${skip[@]}"
done
