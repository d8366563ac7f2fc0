package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	git := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/fakecloud/fakecloud-csi", Version: "v0.0.0-20261129174500-616c8c8abcde+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "616c8c8abcdef0123456789abcdef0123456789a"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	noVCS := &debug.BuildInfo{Main: debug.Module{Path: "github.com/fakecloud/fakecloud-csi", Version: "(devel)"}}
	for _, tc := range []struct {
		name                    string
		stampedVersion, stamped string
		bi                      *debug.BuildInfo
		wantVersion, wantCommit string
	}{
		{"stamped wins over the toolchain's", "v1.2.3", "abc1234", git, "v1.2.3", "abc1234"},
		{"unstamped build in a git checkout", "", "", git, "v0.0.0-20261129174500-616c8c8abcde+dirty", "616c8c8abcde"},
		{"version stamped alone keeps git's commit", "v9.9.9-e2e", "", git, "v9.9.9-e2e", "616c8c8abcde"},
		{"no VCS information", "", "", noVCS, DevVersion, UnknownCommit},
		{"no build information", "", "", nil, DevVersion, UnknownCommit},
		{"short revision kept whole", "", "", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, DevVersion, "abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, c := resolve(tc.stampedVersion, tc.stamped, tc.bi)
			if v != tc.wantVersion || c != tc.wantCommit {
				t.Fatalf("resolve = (%q, %q), want (%q, %q)", v, c, tc.wantVersion, tc.wantCommit)
			}
		})
	}
}
