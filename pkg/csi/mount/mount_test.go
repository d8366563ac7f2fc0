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

// TestParseMountInfoLines: each mountinfo line the kernel writes maps to one MountPoint:
// escaped paths unescaped (space, tab, newline, backslash), any number of optional fields,
// "ro" only as a whole per-mount option (not the super options', not "errors=remount-ro");
// a line without its separator or fields after it is refused.
func TestParseMountInfoLines(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       MountPoint
		wantErr    bool
	}{
		{name: "no optional fields", line: "37 22 0:5 / /proc rw,nosuid - proc proc rw",
			want: MountPoint{ID: 37, Path: "/proc", Root: "/", Source: "proc", FSType: "proc"}},
		{name: "several optional fields", line: "40 22 8:1 /a /b rw shared:5 master:1 propagate_from:2 unbindable - xfs /dev/sdb rw",
			want: MountPoint{ID: 40, Path: "/b", Root: "/a", Source: "/dev/sdb", FSType: "xfs"}},
		{name: "escaped tab newline backslash", line: `41 22 8:1 /src\011x /mnt/a\012b\134c rw - ext4 /dev/with\040space rw`,
			want: MountPoint{ID: 41, Path: "/mnt/a\nb\\c", Root: "/src\tx", Source: "/dev/with space", FSType: "ext4"}},
		{name: "ro among options", line: "42 22 8:1 / /r nosuid,ro,relatime - ext4 /dev/sda1 rw",
			want: MountPoint{ID: 42, Path: "/r", Root: "/", Source: "/dev/sda1", FSType: "ext4", ReadOnly: true}},
		{name: "ro only in super options", line: "43 22 8:1 / /w rw,errors=remount-ro - ext4 /dev/sda1 ro",
			want: MountPoint{ID: 43, Path: "/w", Root: "/", Source: "/dev/sda1", FSType: "ext4"}},
		{name: "subtype fs", line: "44 22 0:50 / /f rw - fuse.sshfs host:/x rw,user_id=0",
			want: MountPoint{ID: 44, Path: "/f", Root: "/", Source: "host:/x", FSType: "fuse.sshfs"}},
		{name: "no separator", line: "45 22 8:1 / /x rw shared:1 ext4 /dev/sda1 rw", wantErr: true},
		{name: "too few fields", line: "1 2 3", wantErr: true},
		{name: "nothing after separator", line: "46 22 8:1 / /x rw shared:1 master:2 -", wantErr: true},
		{name: "bad device field", line: "47 22 8 / /x rw - ext4 /dev/sda1 rw", wantErr: true},
		{name: "bad escape", line: `48 22 8:1 / /x\9 rw - ext4 /dev/sda1 rw`, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseMountInfo(strings.NewReader(c.line + "\n"))
			if c.wantErr {
				if err == nil {
					t.Fatalf("ParseMountInfo(%q) = %+v, want an error", c.line, got)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0] != c.want {
				t.Fatalf("ParseMountInfo(%q) = %+v, %v; want [%+v]", c.line, got, err, c.want)
			}
		})
	}
}

// TestLinuxMountLookup: MountPoint's two ways to find a mount in the table, by the mount ID
// statx gives (bind mounts of one source, even at one path, are told apart only by it) and,
// where statx cannot tell, by path, where the last line (the mount on top) wins. A table
// that cannot be parsed is an error, never "not mounted".
func TestLinuxMountLookup(t *testing.T) {
	const info = `22 1 8:1 / / rw - ext4 /dev/sda1 rw
50 22 8:1 /data/v1 /k/pods/p/mount rw shared:9 - ext4 /dev/sda1 rw
51 50 8:1 /data/v1 /k/pods/p/mount ro shared:9 - ext4 /dev/sda1 rw
52 22 8:1 /data/v1 /k/pods/q/mount rw - ext4 /dev/sda1 rw
53 22 8:1 /data/v\0402 /k/pods/with\040space rw - ext4 /dev/sda1 rw
`
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "mountinfo"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte(info), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(info+"54 22 8:1 / /x rw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &Linux{MountInfo: good}
	for _, c := range []struct {
		id     uint64
		wantID int
		ro     bool
	}{{50, 50, false}, {51, 51, true}, {52, 52, false}, {53, 53, false}, {99, 0, false}, {0, 0, false}} {
		mp, err := l.mountByID(c.id)
		switch {
		case err != nil:
			t.Errorf("mountByID(%d): %v", c.id, err)
		case c.wantID == 0 && mp != nil:
			t.Errorf("mountByID(%d) = %+v, want none", c.id, mp)
		case c.wantID != 0 && (mp == nil || mp.ID != c.wantID || mp.ReadOnly != c.ro):
			t.Errorf("mountByID(%d) = %+v, want ID %d read-only %v", c.id, mp, c.wantID, c.ro)
		}
	}
	for _, c := range []struct {
		path   string
		wantID int
	}{{"/k/pods/p/mount", 51}, {"/k/pods/q/mount", 52}, {"/k/pods/with space", 53}, {"/k/pods", 0}, {"/k/pods/p", 0}} {
		mp, err := l.topmostAt(c.path)
		switch {
		case err != nil:
			t.Errorf("topmostAt(%s): %v", c.path, err)
		case c.wantID == 0 && mp != nil:
			t.Errorf("topmostAt(%s) = %+v, want none", c.path, mp)
		case c.wantID != 0 && (mp == nil || mp.ID != c.wantID):
			t.Errorf("topmostAt(%s) = %+v, want ID %d", c.path, mp, c.wantID)
		}
	}
	lb := &Linux{MountInfo: bad}
	if mp, err := lb.mountByID(50); err == nil {
		t.Errorf("mountByID on a malformed table = %+v, nil; want an error", mp)
	}
	if mp, err := lb.topmostAt("/k/pods/p/mount"); err == nil {
		t.Errorf("topmostAt on a malformed table = %+v, nil; want an error", mp)
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
