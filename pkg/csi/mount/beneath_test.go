package mount

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRootFollowsNoLink: every Root method refuses a link on the way (in the middle or as
// the last element) with ErrSymlink, a path not below the root with ErrOutside, and creates
// nothing past either.
func TestRootFollowsNoLink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "f"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "f"), filepath.Join(dir, "flink")); err != nil {
		t.Fatal(err)
	}
	r := NewRoot(dir)
	through := filepath.Join(dir, "link", "a", "b")
	for name, err := range map[string]error{
		"Open middle": func() error { _, err := r.Open(filepath.Join(dir, "link", "f"), unix.O_PATH, 0); return err }(),
		"Open last":   func() error { _, err := r.Open(filepath.Join(dir, "flink"), unix.O_PATH, 0); return err }(),
		"Check":       r.Check(through),
		"MkdirAll":    func() error { _, err := r.MkdirAll(through, 0o750); return err }(),
		"CreateFile":  func() error { _, err := r.CreateFile(filepath.Join(dir, "link", "new"), 0o640); return err }(),
		"Remove":      r.Remove(filepath.Join(dir, "link", "f")),
		"Lstat":       func() error { _, err := r.Lstat(filepath.Join(dir, "link", "f")); return err }(),
	} {
		if !errors.Is(err, ErrSymlink) {
			t.Errorf("%s through a link: %v, want ErrSymlink", name, err)
		}
	}
	if _, err := r.Open(filepath.Join(dir, "..", "x"), unix.O_PATH, 0); !errors.Is(err, ErrOutside) {
		t.Errorf("Open above the root: %v, want ErrOutside", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("outside holds %d entries, want only f", len(entries))
	}
	// The link itself can be removed (unlinkat never follows) and stat'ed as a link.
	if st, err := r.Lstat(filepath.Join(dir, "flink")); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Errorf("Lstat(flink) = %o, %v; want a link", st.Mode, err)
	}
	if err := r.Remove(filepath.Join(dir, "flink")); err != nil {
		t.Errorf("Remove(flink): %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err != nil {
		t.Errorf("the link's target went with it: %v", err)
	}
	// What is below the root and free of links works.
	f, err := r.MkdirAll(filepath.Join(dir, "x", "y"), 0o750)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if f, err = r.CreateFile(filepath.Join(dir, "x", "y", "z"), 0o640); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := r.Check(filepath.Join(dir, "x", "missing", "deeper")); err != nil {
		t.Errorf("Check of a missing tail: %v", err)
	}
}
