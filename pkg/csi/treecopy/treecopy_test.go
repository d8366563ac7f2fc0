package treecopy

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func lstat(t *testing.T, p string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return &st
}

// mkdeep makes depth nested folders named name under dir, fd-relatively (the path may be
// longer than PATH_MAX), with a file "leaf" holding "deep" at the bottom.
func mkdeep(t *testing.T, dir, name string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for range depth {
		must(t, unix.Mkdirat(fd, name, 0o755))
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		unix.Close(fd)
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "leaf", unix.O_WRONLY|unix.O_CREAT, 0o644)
	must(t, err)
	_, err = unix.Write(f, []byte("deep"))
	must(t, err)
	unix.Close(f)
}

// deepLeaf reads "leaf" at the bottom of depth folders named name under dir.
func deepLeaf(t *testing.T, dir, name string, depth int) string {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for range depth {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "leaf", unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	must(t, err)
	defer unix.Close(f)
	buf := make([]byte, 16)
	n, err := unix.Read(f, buf)
	must(t, err)
	return string(buf[:n])
}

// TestCopy: what a copy keeps (symlinks as symlinks, never followed; hard links as links;
// FIFOs and sockets; holes; modes, owners, times; trees deeper than PATH_MAX) and what it
// refuses before anything is created (device nodes; trees beyond the bounds), with the typed
// error.
func TestCopy(t *testing.T) {
	root := os.Geteuid() == 0
	tests := []struct {
		name string
		root bool // needs root (mknod of a device)
		opt  Options
		// make fills the source folder src; outside is a folder beside it.
		make    func(t *testing.T, src, outside string)
		wantErr error
		// check looks at the copy dst (when no error is wanted).
		check func(t *testing.T, src, dst, outside string)
	}{{
		name: "symlinks are copied as symlinks and never followed",
		make: func(t *testing.T, src, outside string) {
			must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
			must(t, os.Mkdir(filepath.Join(outside, "secretdir"), 0o700))
			must(t, os.WriteFile(filepath.Join(outside, "secretdir", "f"), []byte("secret"), 0o600))
			must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "abs")))
			must(t, os.Symlink("../outside/secretdir", filepath.Join(src, "rel")))
			must(t, os.Symlink("dangling", filepath.Join(src, "dangling")))
		},
		check: func(t *testing.T, src, dst, outside string) {
			for name, want := range map[string]string{"abs": filepath.Join(outside, "secret"), "rel": "../outside/secretdir", "dangling": "dangling"} {
				if lstat(t, filepath.Join(dst, name)).Mode&unix.S_IFMT != unix.S_IFLNK {
					t.Errorf("%s is not a symlink in the copy", name)
				}
				if got, err := os.Readlink(filepath.Join(dst, name)); err != nil || got != want {
					t.Errorf("%s -> %q, %v; want %q", name, got, err, want)
				}
			}
		},
	}, {
		name: "hard links stay links",
		make: func(t *testing.T, src, _ string) {
			must(t, os.Mkdir(filepath.Join(src, "a"), 0o755))
			must(t, os.Mkdir(filepath.Join(src, "b"), 0o755))
			must(t, os.WriteFile(filepath.Join(src, "a", "f"), bytes.Repeat([]byte{1}, 1<<20), 0o644))
			for _, l := range []string{"a/g", "b/f", "top"} {
				must(t, os.Link(filepath.Join(src, "a", "f"), filepath.Join(src, l)))
			}
			must(t, os.Symlink("x", filepath.Join(src, "sl")))
			must(t, os.Link(filepath.Join(src, "sl"), filepath.Join(src, "sl2")))
		},
		check: func(t *testing.T, src, dst, _ string) {
			first := lstat(t, filepath.Join(dst, "a", "f"))
			if first.Nlink != 4 {
				t.Errorf("a/f has %d links in the copy, want 4", first.Nlink)
			}
			for _, l := range []string{"a/g", "b/f", "top"} {
				if st := lstat(t, filepath.Join(dst, l)); st.Ino != first.Ino {
					t.Errorf("%s is not a link to a/f in the copy", l)
				}
			}
			if a, b := lstat(t, filepath.Join(dst, "sl")), lstat(t, filepath.Join(dst, "sl2")); a.Ino != b.Ino || a.Mode&unix.S_IFMT != unix.S_IFLNK {
				t.Errorf("hard-linked symlinks are not one symlink in the copy")
			}
		},
	}, {
		name: "FIFOs and sockets are recreated",
		make: func(t *testing.T, src, _ string) {
			must(t, unix.Mkfifo(filepath.Join(src, "fifo"), 0o640))
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(src, "sock"), Net: "unix"})
			must(t, err)
			l.SetUnlinkOnClose(false)
			must(t, l.Close())
		},
		check: func(t *testing.T, src, dst, _ string) {
			if st := lstat(t, filepath.Join(dst, "fifo")); st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Mode&0o7777 != 0o640 {
				t.Errorf("fifo in the copy: mode %o, want a FIFO 0640", st.Mode)
			}
			if st := lstat(t, filepath.Join(dst, "sock")); st.Mode&unix.S_IFMT != unix.S_IFSOCK {
				t.Errorf("sock in the copy: mode %o, want a socket", st.Mode)
			}
		},
	}, {
		name: "holes stay holes, modes and times are kept",
		make: func(t *testing.T, src, _ string) {
			f, err := os.Create(filepath.Join(src, "sparse"))
			must(t, err)
			must(t, f.Truncate(64<<20))
			_, err = f.WriteAt(bytes.Repeat([]byte{7}, 4096), 32<<20)
			must(t, err)
			must(t, f.Close())
			must(t, os.Chmod(filepath.Join(src, "sparse"), 0o4751))
			must(t, os.Mkdir(filepath.Join(src, "ro"), 0o500))
		},
		check: func(t *testing.T, src, dst, _ string) {
			s, d := lstat(t, filepath.Join(src, "sparse")), lstat(t, filepath.Join(dst, "sparse"))
			if d.Size != 64<<20 || d.Blocks*512 > 1<<20 {
				t.Errorf("sparse copy: %d bytes, %d on disk; want 64 MiB taking little", d.Size, d.Blocks*512)
			}
			b, err := os.ReadFile(filepath.Join(dst, "sparse"))
			must(t, err)
			if b[32<<20] != 7 || b[32<<20+4095] != 7 || b[32<<20+4096] != 0 || b[0] != 0 {
				t.Errorf("sparse copy's data differ")
			}
			if d.Mode != s.Mode || d.Mtim != s.Mtim || d.Uid != s.Uid {
				t.Errorf("sparse copy: mode %o mtime %v uid %d; want %o %v %d", d.Mode, d.Mtim, d.Uid, s.Mode, s.Mtim, s.Uid)
			}
			if st := lstat(t, filepath.Join(dst, "ro")); st.Mode&0o7777 != 0o500 {
				t.Errorf("ro folder copied with mode %o, want 0500", st.Mode&0o7777)
			}
		},
	}, {
		name: "a tree deeper than PATH_MAX is copied",
		make: func(t *testing.T, src, _ string) { mkdeep(t, src, strings.Repeat("d", 40), 200) }, // 8 KiB of path
		check: func(t *testing.T, src, dst, _ string) {
			if got := deepLeaf(t, dst, strings.Repeat("d", 40), 200); got != "deep" {
				t.Errorf("deep leaf in the copy = %q", got)
			}
		},
	}, {
		name:    "a tree deeper than MaxDepth is refused",
		opt:     Options{MaxDepth: 10},
		make:    func(t *testing.T, src, _ string) { mkdeep(t, src, "d", 11) },
		wantErr: ErrTooDeep,
	}, {
		name: "more entries than MaxEntries are refused",
		opt:  Options{MaxEntries: 5},
		make: func(t *testing.T, src, _ string) {
			for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
				must(t, os.WriteFile(filepath.Join(src, n), nil, 0o644))
			}
		},
		wantErr: ErrTooManyEntries,
	}, {
		name: "more data than MaxBytes is refused",
		opt:  Options{MaxBytes: 1000},
		make: func(t *testing.T, src, _ string) {
			must(t, os.WriteFile(filepath.Join(src, "big"), make([]byte, 4096), 0o644))
		},
		wantErr: ErrTooLarge,
	}, {
		name: "a device node is refused before anything is created",
		root: true,
		make: func(t *testing.T, src, _ string) {
			must(t, os.WriteFile(filepath.Join(src, "a"), []byte("data"), 0o644))
			must(t, unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		},
		wantErr: ErrUnsupported,
	}, {
		name: "a folder bind-mounted from outside is refused, never crossed",
		root: true,
		make: func(t *testing.T, src, outside string) {
			must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
			must(t, os.Mkdir(filepath.Join(src, "m"), 0o755))
			bindForTest(t, outside, filepath.Join(src, "m"))
		},
		wantErr: ErrUnsupported,
	}, {
		name: "a file bind-mounted from outside is refused, never read",
		root: true,
		make: func(t *testing.T, src, outside string) {
			must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
			must(t, os.WriteFile(filepath.Join(src, "f"), nil, 0o644))
			bindForTest(t, filepath.Join(outside, "secret"), filepath.Join(src, "f"))
		},
		wantErr: ErrUnsupported,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && !root {
				t.Skip("needs root (mknod of a device node, bind mounts)")
			}
			base := t.TempDir()
			src, outside, dst := filepath.Join(base, "src"), filepath.Join(base, "outside"), filepath.Join(base, "dst")
			must(t, os.Mkdir(src, 0o750))
			must(t, os.Mkdir(outside, 0o700))
			tc.make(t, src, outside)
			st, err := Copy(context.Background(), src, dst, tc.opt)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Copy = %v, want %v", err, tc.wantErr)
				}
				if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a refused copy left %s (%v)", dst, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Copy: %v", err)
			}
			if st.Attempts != 1 {
				t.Errorf("a still tree took %d attempts", st.Attempts)
			}
			if s, d := lstat(t, src), lstat(t, dst); s.Mode != d.Mode {
				t.Errorf("root copied with mode %o, want %o", d.Mode, s.Mode)
			}
			tc.check(t, src, dst, outside)
		})
	}
}

// TestCopyIsNotSteeredBySwaps: a writer swapping an entry of the tree between a regular file
// (or a folder) and a symlink to a secret outside it (renameat2 RENAME_EXCHANGE, in a loop)
// while the tree is copied never gets the secret into a copy: every copy either holds no
// secret or fails with ErrChanged.
func TestCopyIsNotSteeredBySwaps(t *testing.T) {
	base := t.TempDir()
	src, outside := filepath.Join(base, "src"), filepath.Join(base, "outside")
	must(t, os.MkdirAll(filepath.Join(src, "victimdir"), 0o755))
	must(t, os.MkdirAll(filepath.Join(outside, "secretdir"), 0o700))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("TOP-SECRET"), 0o600))
	must(t, os.WriteFile(filepath.Join(outside, "secretdir", "f"), []byte("TOP-SECRET"), 0o600))
	must(t, os.WriteFile(filepath.Join(src, "victim"), []byte("harmless"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "victimdir", "f"), []byte("harmless"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "swap")))
	must(t, os.Symlink(filepath.Join(outside, "secretdir"), filepath.Join(src, "swapdir")))

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(src, "victim"), unix.AT_FDCWD, filepath.Join(src, "swap"), unix.RENAME_EXCHANGE)
			_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(src, "victimdir"), unix.AT_FDCWD, filepath.Join(src, "swapdir"), unix.RENAME_EXCHANGE)
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	changed := 0
	for i := range 40 {
		dst := filepath.Join(base, "copy", strings.Repeat("x", i+1))
		must(t, os.MkdirAll(filepath.Dir(dst), 0o700))
		_, err := Copy(context.Background(), src, dst, Options{Attempts: 1})
		if errors.Is(err, ErrChanged) {
			changed++
			continue
		}
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		must(t, filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			if b, err := os.ReadFile(p); err != nil || bytes.Contains(b, []byte("SECRET")) {
				t.Errorf("copy %d: %s holds the secret outside the tree (%v)", i, p, err)
			}
			return nil
		}))
	}
	t.Logf("%d of 40 copies found the tree changing", changed)
}

// TestCopyAllIsOnePointInTime: a writer that keeps files a and z of two trees equal (writes a,
// then z, the same counter) while they are copied never gets a copy holding a state that never
// existed (z newer than a); a copy either holds a = z or a one step ahead of z, or fails with
// ErrChanged.
func TestCopyAllIsOnePointInTime(t *testing.T) {
	base := t.TempDir()
	one, two := filepath.Join(base, "one"), filepath.Join(base, "two")
	must(t, os.Mkdir(one, 0o755))
	must(t, os.Mkdir(two, 0o755))
	a, z := filepath.Join(one, "a"), filepath.Join(two, "z")
	must(t, os.WriteFile(filepath.Join(one, "m"), make([]byte, 4<<20), 0o644)) // copied between a and z
	write := func(p string, v uint64) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		must(t, err)
		var b [8]byte
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		_, err = f.WriteAt(b[:], 0)
		must(t, err)
		must(t, f.Close())
	}
	read := func(p string) uint64 {
		b, err := os.ReadFile(p)
		must(t, err)
		var v uint64
		for i := range 8 {
			v |= uint64(b[i]) << (8 * i)
		}
		return v
	}
	write(a, 0)
	write(z, 0)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for v := uint64(1); !stop.Load(); v++ {
			write(a, v)
			write(z, v)
			if v%4 == 0 {
				// In bursts, so that some copies may find the trees still; what is asserted
				// does not depend on it.
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	changed := 0
	for i := range 20 {
		d1, d2 := filepath.Join(base, "c1", strings.Repeat("x", i+1)), filepath.Join(base, "c2", strings.Repeat("x", i+1))
		must(t, os.MkdirAll(filepath.Dir(d1), 0o700))
		must(t, os.MkdirAll(filepath.Dir(d2), 0o700))
		_, err := CopyAll(context.Background(), []Pair{{one, d1}, {two, d2}}, Options{Attempts: 1})
		if errors.Is(err, ErrChanged) {
			changed++
			continue
		}
		must(t, err)
		if va, vz := read(filepath.Join(d1, "a")), read(filepath.Join(d2, "z")); va != vz && va != vz+1 {
			t.Errorf("copy %d holds a=%d z=%d, a state that never existed", i, va, vz)
		}
	}
	t.Logf("%d of 20 copies found the trees changing", changed)
}

// benchTree is 20 folders of 100 files of 4 KiB.
func benchTree(b *testing.B) string {
	b.Helper()
	src := filepath.Join(b.TempDir(), "src")
	for d := range 20 {
		dir := filepath.Join(src, "d"+strings.Repeat("x", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, "f"+strings.Repeat("y", f)), make([]byte, 4096), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return src
}

// BenchmarkCopy is a whole copy (scan, copy with an fsync per file, scan) of 2,020 entries.
func BenchmarkCopy(b *testing.B) {
	src := benchTree(b)
	dst := filepath.Join(b.TempDir(), "dst")
	for b.Loop() {
		if _, err := Copy(context.Background(), src, dst, Options{}); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScan is one of the two scans a copy makes (the cost of the point-in-time check).
func BenchmarkScan(b *testing.B) {
	src := benchTree(b)
	for b.Loop() {
		s := &scanner{opt: Options{}.withDefaults()}
		if _, err := s.scanRoot(context.Background(), src); err != nil {
			b.Fatal(err)
		}
	}
}

// bindForTest bind-mounts from on to (root only) and unmounts it when the test ends.
func bindForTest(t *testing.T, from, to string) {
	t.Helper()
	must(t, unix.Mount(from, to, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(to, unix.MNT_DETACH) })
}
