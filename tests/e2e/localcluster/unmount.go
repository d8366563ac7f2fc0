package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// unmountUnder removes every mount whose mount point is below dir, deepest first, and
// returns the mount points it could not remove. The node plugins bind-mount volumes into
// the kubelets' pod directories under the run folder (as root); a cluster stopped with pods
// still running leaves those mounts behind, since nothing unpublishes them. With
// mountinfo "" it reads /proc/self/mountinfo.
func unmountUnder(dir, mountinfo string, m mount.Mounter) ([]string, error) {
	if mountinfo == "" {
		mountinfo = "/proc/self/mountinfo"
	}
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	mps, err := mount.ParseMountInfo(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", mountinfo, err)
	}
	// mountinfo holds canonical paths; a run folder under a symlinked TMPDIR would match none.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	var paths []string
	for _, mp := range mps {
		if strings.HasPrefix(mp.Path, prefix) {
			paths = append(paths, mp.Path)
		}
	}
	// Deepest first, so a mount inside another goes before it; a path mounted twice
	// appears twice and is unmounted twice.
	slices.SortStableFunc(paths, func(a, b string) int {
		return strings.Count(b, string(filepath.Separator)) - strings.Count(a, string(filepath.Separator))
	})
	var left []string
	for _, p := range paths {
		if err := m.Unmount(p); err != nil {
			left = append(left, p)
		}
	}
	return left, nil
}
