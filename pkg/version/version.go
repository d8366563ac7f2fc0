// Package version holds the build's version and commit, stamped by the Makefile with
// -ldflags "-X github.com/fakecloud/fakecloud-csi/pkg/version.Version=... -X ...Commit=...".
// Both binaries print them for --version.
package version

import "fmt"

// Version is the release version (git describe); "v0.0.0-dev" in unstamped builds. It is a
// variable only so that the linker can set it; nothing assigns it at run time.
var Version = "v0.0.0-dev"

// Commit is the short git commit of the build; "unknown" in unstamped builds. Set by the linker.
var Commit = "unknown"

// String is the one-line form binaries print for --version, e.g. "fakecloud v0.1.0 (abc1234)".
func String(binary string) string {
	return fmt.Sprintf("%s %s (%s)", binary, Version, Commit)
}
