// Package version holds the build's version and commit, stamped by the Makefile with
// -ldflags "-X github.com/fakecloud/fakecloud-csi/pkg/version.Version=... -X ...Commit=...".
// A build that is not stamped (go build, go install, the local cluster's builds) falls back to
// what the Go toolchain recorded from git, so that /metrics and --version still tell two
// builds apart during an upgrade.
package version

import (
	"fmt"
	"runtime/debug"
)

// Version is the release version (git describe) stamped by the linker; empty in unstamped
// builds. It is a variable only so that the linker can set it; nothing assigns it at run time.
// Read it through Get.
var Version = ""

// Commit is the short git commit stamped by the linker; empty in unstamped builds. Read it
// through Get.
var Commit = ""

// Unknown values that Get reports when neither the linker nor the toolchain recorded one.
const (
	DevVersion    = "v0.0.0-dev"
	UnknownCommit = "unknown"
)

// Get returns the build's version and short commit (12 hex digits at most): the stamped
// values when set, else the main module's version and vcs.revision that the Go toolchain
// embeds when it builds inside a git checkout (a pseudo-version such as
// v0.0.0-20261129174500-616c8c8abcde+dirty), else DevVersion and UnknownCommit.
func Get() (version, commit string) {
	bi, _ := debug.ReadBuildInfo() // nil in a binary built without module support
	return resolve(Version, Commit, bi)
}

// resolve is Get with its inputs passed in, so that tests can give it any build info.
func resolve(stampedVersion, stampedCommit string, bi *debug.BuildInfo) (version, commit string) {
	version, commit = stampedVersion, stampedCommit
	if bi != nil {
		if v := bi.Main.Version; version == "" && v != "" && v != "(devel)" {
			version = v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && commit == "" && s.Value != "" {
				commit = s.Value[:min(12, len(s.Value))]
			}
		}
	}
	if version == "" {
		version = DevVersion
	}
	if commit == "" {
		commit = UnknownCommit
	}
	return version, commit
}

// String is the one-line form binaries print for --version, e.g. "fakecloud v0.1.0 (abc1234)".
func String(binary string) string {
	v, c := Get()
	return fmt.Sprintf("%s %s (%s)", binary, v, c)
}
