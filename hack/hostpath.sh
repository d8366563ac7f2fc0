#!/usr/bin/env bash
# hack/hostpath.sh: build csi-driver-host-path's node plugin (cmd/hostpathplugin) at
# HOSTPATH_VERSION into bin/hostpathplugin-<version>, once per version, and print that path.
# `make bench` compares our NodeGetInfo with its (bench/hostpath). It is a program we run, never
# a dependency: it builds from its own source tree with its own vendor/ and go.mod, so nothing
# of it enters any module of ours. The source comes from the Go module proxy when it serves the
# version, else from a shallow git clone of HOSTPATH_GIT at the version's tag (any git URL or
# local repository; the proxy refuses csi-driver-host-path on some networks).
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTPATH_VERSION=${HOSTPATH_VERSION:-v1.18.0}
HOSTPATH_GIT=${HOSTPATH_GIT:-https://github.com/kubernetes-csi/csi-driver-host-path}
# The version names a tag, a module version and two paths: a release tag only.
if ! [[ $HOSTPATH_VERSION =~ ^v[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]]; then
	echo "hack/hostpath.sh: HOSTPATH_VERSION must be a release tag like v1.18.0, got '$HOSTPATH_VERSION'" >&2
	exit 2
fi
module=github.com/kubernetes-csi/csi-driver-host-path
bin=$PWD/bin/hostpathplugin-$HOSTPATH_VERSION

if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p bin _output/hostpath
# The proxy first: go mod download prints the unpacked module's directory (read-only).
src=$(go mod download -json "$module@$HOSTPATH_VERSION" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || src=""
if [[ -z $src ]]; then
	src=$PWD/_output/hostpath/src-$HOSTPATH_VERSION
	if [[ ! -f $src/go.mod ]]; then
		echo "hack/hostpath.sh: $module@$HOSTPATH_VERSION not served by the module proxy; cloning $HOSTPATH_GIT at $HOSTPATH_VERSION" >&2
		rm -rf "$src"
		GIT_TERMINAL_PROMPT=0 timeout 120 git -c advice.detachedHead=false clone --quiet --depth 1 --branch "$HOSTPATH_VERSION" "$HOSTPATH_GIT" "$src" >&2
	fi
fi
echo "hack/hostpath.sh: go build $module/cmd/hostpathplugin@$HOSTPATH_VERSION (from $src) into $bin" >&2
# Its own go.mod and vendor/ decide its dependencies; GOFLAGS of ours must not (e.g. -mod=mod).
(cd "$src" && GOFLAGS=-buildvcs=false go build -trimpath -o "$bin.tmp" ./cmd/hostpathplugin) >&2
mv "$bin.tmp" "$bin"
echo "$bin"
