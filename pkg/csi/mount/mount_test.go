package mount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMountInfo(t *testing.T) {
	const info = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
36 22 8:1 /var/lib/x/with\040space /mnt/a\040b ro,nosuid master:1 - ext4 /dev/sda1 rw,errors=continue
37 22 0:5 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
`
	got, err := ParseMountInfo(strings.NewReader(info))
	if err != nil {
		t.Fatal(err)
	}
	want := []MountPoint{
		{ID: 22, Path: "/", Root: "/", Source: "/dev/sda1", FSType: "ext4"},
		{ID: 36, Path: "/mnt/a b", Root: "/var/lib/x/with space", Source: "/dev/sda1", FSType: "ext4", ReadOnly: true},
		{ID: 37, Path: "/proc", Root: "/", Source: "proc", FSType: "proc"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mount %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := ParseMountInfo(strings.NewReader("1 2 3\n")); err == nil {
		t.Error("malformed line parsed without error")
	}
}

// requireRoot skips tests that call mount(2): they need CAP_SYS_ADMIN.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("real bind mounts need root (CAP_SYS_ADMIN); run the tests as root to cover pkg/csi/mount.Linux")
	}
}

// testMounters runs fn against the fake always and against the real mounter as root, so
// that the fake is held to the kernel's behaviour.
func testMounters(t *testing.T, fn func(t *testing.T, m Mounter, real bool)) {
	t.Run("fake", func(t *testing.T) { fn(t, NewFake(), false) })
	t.Run("linux", func(t *testing.T) {
		requireRoot(t)
		fn(t, NewLinux(), true)
	})
}

func TestBindMountDirectory(t *testing.T) {
	testMounters(t, func(t *testing.T, m Mounter, real bool) {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		for _, d := range []string{src, dst} {
			if err := os.Mkdir(d, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(src, "data"), []byte("hello"), 0o640); err != nil {
			t.Fatal(err)
		}
		if mp, err := m.MountPoint(dst); err != nil || mp != nil {
			t.Fatalf("MountPoint before mount = %+v, %v; want nil, nil", mp, err)
		}
		if err := m.BindMount(src, dst, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Unmount(dst) })
		mp, err := m.MountPoint(dst)
		if err != nil || mp == nil || mp.ReadOnly {
			t.Fatalf("MountPoint after mount = %+v, %v; want a read-write mount", mp, err)
		}
		if real {
			b, err := os.ReadFile(filepath.Join(dst, "data"))
			if err != nil || string(b) != "hello" {
				t.Fatalf("read through bind mount: %q, %v", b, err)
			}
		}
		if err := m.Unmount(dst); err != nil {
			t.Fatal(err)
		}
		if mp, err := m.MountPoint(dst); err != nil || mp != nil {
			t.Fatalf("MountPoint after unmount = %+v, %v; want nil, nil", mp, err)
		}
		if err := m.Unmount(dst); err == nil {
			t.Error("unmounting a non-mount point succeeded")
		}
		if mp, err := m.MountPoint(filepath.Join(dir, "missing")); err != nil || mp != nil {
			t.Errorf("MountPoint of a missing path = %+v, %v; want nil, nil", mp, err)
		}
	})
}

func TestBindMountFileReadOnly(t *testing.T) {
	testMounters(t, func(t *testing.T, m Mounter, real bool) {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "src.img"), filepath.Join(dir, "dst")
		if err := os.WriteFile(src, []byte("block"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, nil, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := m.BindMount(src, dst, true); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Unmount(dst) })
		mp, err := m.MountPoint(dst)
		if err != nil || mp == nil || !mp.ReadOnly {
			t.Fatalf("MountPoint = %+v, %v; want a read-only mount", mp, err)
		}
		if real {
			if err := os.WriteFile(dst, []byte("x"), 0o640); err == nil {
				t.Error("wrote through a read-only bind mount")
			}
		}
	})
}

func TestBindMountKindMismatch(t *testing.T) {
	testMounters(t, func(t *testing.T, m Mounter, _ bool) {
		dir := t.TempDir()
		file := filepath.Join(dir, "f")
		if err := os.WriteFile(file, nil, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := m.BindMount(dir, file, false); err == nil {
			_ = m.Unmount(file)
			t.Fatal("bind mount of a directory onto a file succeeded")
		}
		if err := m.BindMount(filepath.Join(dir, "missing"), file, false); err == nil {
			_ = m.Unmount(file)
			t.Fatal("bind mount of a missing source succeeded")
		}
	})
}

// TestShows: a bind mount shows its source, and a bind of that bind too; a mount of
// another folder, or a path that is no mount point, does not.
func TestShows(t *testing.T) {
	testMounters(t, func(t *testing.T, m Mounter, real bool) {
		dir := t.TempDir()
		src, other, dst, dst2, plain := filepath.Join(dir, "src"), filepath.Join(dir, "other"), filepath.Join(dir, "dst"), filepath.Join(dir, "dst2"), filepath.Join(dir, "plain")
		for _, d := range []string{src, other, dst, dst2, plain} {
			if err := os.Mkdir(d, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.BindMount(src, dst, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Unmount(dst) })
		if err := m.BindMount(dst, dst2, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Unmount(dst2) })
		f, err := os.OpenFile(src, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, c := range []struct {
			path, source string
			want         bool
		}{
			{dst, src, true},
			{dst, FdPath(f), true},
			{dst2, src, true},
			{dst, other, false},
			{plain, plain, false},
			{src, src, false},
		} {
			got, err := m.Shows(c.path, c.source)
			if err != nil || got != c.want {
				t.Errorf("Shows(%s, %s) = %v, %v; want %v", c.path, c.source, got, err, c.want)
			}
		}
	})
}
