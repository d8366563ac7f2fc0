package mount

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Fake is an in-memory Mounter for unit tests. It checks what the kernel would (source and
// target exist and are both directories or both files) and records mounts without touching
// the file system, so tests run unprivileged. Safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	mounts map[string][]MountPoint
}

var _ Mounter = (*Fake)(nil)

// NewFake returns a Fake with nothing mounted.
func NewFake() *Fake { return &Fake{mounts: map[string][]MountPoint{}} }

// BindMount implements Mounter.
func (f *Fake) BindMount(source, target string, readOnly bool) error {
	si, err := os.Stat(source)
	if err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", source, target, err)
	}
	ti, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", source, target, err)
	}
	if si.IsDir() != ti.IsDir() {
		return fmt.Errorf("bind mount %s on %s: %w", source, target, syscall.ENOTDIR)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := filepath.Clean(target)
	f.mounts[t] = append(f.mounts[t], MountPoint{Path: t, Root: filepath.Clean(source), Source: "fake", FSType: "fake", ReadOnly: readOnly})
	return nil
}

// Unmount implements Mounter.
func (f *Fake) Unmount(target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := filepath.Clean(target)
	stack := f.mounts[t]
	if len(stack) == 0 {
		return fmt.Errorf("unmount %s: %w", target, syscall.EINVAL)
	}
	if len(stack) == 1 {
		delete(f.mounts, t)
	} else {
		f.mounts[t] = stack[:len(stack)-1]
	}
	return nil
}

// MountPoint implements Mounter.
func (f *Fake) MountPoint(path string) (*MountPoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stack := f.mounts[filepath.Clean(path)]
	if len(stack) == 0 {
		return nil, nil
	}
	m := stack[len(stack)-1]
	return &m, nil
}

// Mounts returns how many mounts are stacked at each mount point.
func (f *Fake) Mounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for p, s := range f.mounts {
		out[p] = len(s)
	}
	return out
}
