package mount

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// finder is what both Mounters offer besides the interface, to check for leaks.
type finder interface {
	FindLoop(file string) (Loop, bool, error)
}

// requireLoops skips tests that attach real loop devices: they need root and the loop
// driver's control device.
func requireLoops(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if _, err := os.Stat(loopControl); err != nil {
		t.Skipf("no %s (%v): the loop driver is not available here", loopControl, err)
	}
}

// testLoopMounters runs fn against the fake and, as root with /dev/loop-control, against
// the real implementation; newSame returns a second Mounter over the same "kernel" state, as
// a restarted process sees it.
func testLoopMounters(t *testing.T, fn func(t *testing.T, m Mounter, newSame func() Mounter, real bool)) {
	t.Run("fake", func(t *testing.T) {
		f := NewFake()
		fn(t, f, func() Mounter { return f }, false)
	})
	t.Run("linux", func(t *testing.T) {
		requireLoops(t)
		fn(t, NewLinux(), func() Mounter { return NewLinux() }, true)
	})
}

// sysfsLoops counts the loop devices the kernel lists with backing file p (real only).
func sysfsLoops(t *testing.T, p string) int {
	t.Helper()
	p, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	n := 0
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil && strings.TrimSpace(string(b)) == p {
			n++
		}
	}
	return n
}

func writeSized(t *testing.T, p string, size int64) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
}

func TestLoopLifecycle(t *testing.T) {
	testLoopMounters(t, func(t *testing.T, m Mounter, newSame func() Mounter, real bool) {
		dir := t.TempDir()
		file := filepath.Join(dir, "block.img")
		writeSized(t, file, 8<<20+100) // not a multiple of 512: the device rounds down
		t.Cleanup(func() { _ = m.DetachLoop(file) })

		lp, err := m.AttachLoop(file)
		if err != nil {
			t.Fatal(err)
		}
		if lp.Path == "" || !strings.HasPrefix(lp.Device, "7:") {
			t.Fatalf("AttachLoop = %+v; want a path and a 7:N device number", lp)
		}
		if real {
			fi, err := os.Stat(lp.Path)
			if err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
				t.Fatalf("%s is %v, %v; want a block device", lp.Path, fi, err)
			}
			if n := sysfsLoops(t, file); n != 1 {
				t.Fatalf("%d loops over %s in sysfs after attach, want 1", n, file)
			}
		}
		// Idempotent, also for another process: the same device, never a second one.
		for _, mm := range []Mounter{m, newSame()} {
			again, err := mm.AttachLoop(file)
			if err != nil || again != lp {
				t.Fatalf("AttachLoop again = %+v, %v; want %+v", again, err, lp)
			}
		}
		if real && sysfsLoops(t, file) != 1 {
			t.Fatal("a second AttachLoop attached a second device")
		}
		if got, err := m.BlockSize(lp.Path); err != nil || got != 8<<20 {
			t.Fatalf("device size = %d, %v; want %d", got, err, 8<<20)
		}

		// The device keeps its size until ResizeLoop, then follows the file.
		if err := os.Truncate(file, 16<<20); err != nil {
			t.Fatal(err)
		}
		if got, err := m.BlockSize(lp.Path); err != nil || got != 8<<20 {
			t.Fatalf("device size before ResizeLoop = %d, %v; want %d", got, err, 8<<20)
		}
		if got, err := newSame().ResizeLoop(file); err != nil || got != 16<<20 {
			t.Fatalf("ResizeLoop = %d, %v; want %d", got, err, 16<<20)
		}
		if got, err := m.BlockSize(lp.Path); err != nil || got != 16<<20 {
			t.Fatalf("device size after ResizeLoop = %d, %v; want %d", got, err, 16<<20)
		}

		// A bind mount of the device, and a bind mount of that, report its number.
		staged, published := filepath.Join(dir, "staged"), filepath.Join(dir, "published")
		writeSized(t, staged, 0)
		writeSized(t, published, 0)
		if err := m.BindMount(lp.Path, staged, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Unmount(staged) })
		if err := m.BindMount(staged, published, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Unmount(published) })
		for _, p := range []string{staged, published} {
			mp, err := m.MountPoint(p)
			if err != nil || mp == nil || mp.Device != lp.Device {
				t.Fatalf("MountPoint(%s) = %+v, %v; want device %s", p, mp, err, lp.Device)
			}
			if got, err := m.BlockSize(p); err != nil || got != 16<<20 {
				t.Fatalf("size through %s = %d, %v; want %d", p, got, err, 16<<20)
			}
		}
		if real {
			// What is written through the published device lands in the backing file.
			msg := []byte("through the loop device")
			if err := writeAt(published, msg, 4096); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, len(msg))
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.ReadAt(b, 4096)
			f.Close()
			if err != nil || !bytes.Equal(b, msg) {
				t.Fatalf("backing file has %q, %v; want %q", b, err, msg)
			}
		}
		// A plain file bind mount is no device (the bug this package's loops fix).
		plain := filepath.Join(dir, "plain")
		writeSized(t, plain, 0)
		if err := m.BindMount(file, plain, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Unmount(plain) })
		if mp, err := m.MountPoint(plain); err != nil || mp == nil || mp.Device != "" {
			t.Fatalf("MountPoint of a file bind mount = %+v, %v; want no device", mp, err)
		}
		for _, p := range []string{plain, published, staged} {
			if err := m.Unmount(p); err != nil {
				t.Fatal(err)
			}
		}

		// Detach, from another process too; detaching again is success.
		if err := newSame().DetachLoop(file); err != nil {
			t.Fatal(err)
		}
		if err := m.DetachLoop(file); err != nil {
			t.Fatalf("second DetachLoop: %v", err)
		}
		if _, ok, err := m.(finder).FindLoop(file); err != nil || ok {
			t.Fatalf("FindLoop after detach = %v, %v; want none", ok, err)
		}
		if real && sysfsLoops(t, file) != 0 {
			t.Fatal("loop still attached after DetachLoop")
		}
		if _, err := m.ResizeLoop(file); !errors.Is(err, ErrNoLoop) {
			t.Fatalf("ResizeLoop after detach: %v; want ErrNoLoop", err)
		}
	})
}

func TestLoopRefusesWhatIsNotAFile(t *testing.T) {
	testLoopMounters(t, func(t *testing.T, m Mounter, _ func() Mounter, _ bool) {
		dir := t.TempDir()
		for _, p := range []string{dir, filepath.Join(dir, "missing")} {
			if lp, err := m.AttachLoop(p); err == nil {
				_ = m.DetachLoop(p)
				t.Errorf("AttachLoop(%s) = %+v; want an error", p, lp)
			}
		}
		if err := m.DetachLoop(filepath.Join(dir, "missing")); err != nil {
			t.Errorf("DetachLoop of a missing file: %v; want success", err)
		}
		if _, err := m.ResizeLoop(filepath.Join(dir, "missing")); err == nil {
			t.Error("ResizeLoop of a missing file succeeded")
		}
	})
}

// TestLoopDetachOfDeletedFile: a backing file removed while attached is still found (as
// "path (deleted)") and detached, so nothing leaks.
func TestLoopDetachOfDeletedFile(t *testing.T) {
	testLoopMounters(t, func(t *testing.T, m Mounter, _ func() Mounter, real bool) {
		dir := t.TempDir()
		file := filepath.Join(dir, "block.img")
		writeSized(t, file, 1<<20)
		lp, err := m.AttachLoop(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		if err := m.DetachLoop(file); err != nil {
			t.Fatal(err)
		}
		if real {
			b, err := os.ReadFile(filepath.Join(sysBlock, filepath.Base(lp.Path), "loop", "backing_file"))
			if err == nil {
				t.Fatalf("%s still attached to %q", lp.Path, b)
			}
		} else if m.(*Fake).Loops() != 0 {
			t.Fatal("fake loop still attached")
		}
	})
}

func TestBlockSizeOfFiles(t *testing.T) {
	testMounters(t, func(t *testing.T, m Mounter, _ bool) {
		dir := t.TempDir()
		file := filepath.Join(dir, "f")
		writeSized(t, file, 12345)
		if got, err := m.BlockSize(file); err != nil || got != 12345 {
			t.Errorf("BlockSize(file) = %d, %v; want 12345", got, err)
		}
		if _, err := m.BlockSize(dir); err == nil {
			t.Error("BlockSize of a folder succeeded")
		}
		if _, err := m.BlockSize(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("BlockSize of a missing path: %v; want ErrNotExist", err)
		}
	})
}

func writeAt(p string, b []byte, off int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	if err := unix.Fsync(int(f.Fd())); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestLoopDetachWhileOpen (real only: the fake has no openers): a device someone holds open
// (the kubelet's losetup "fd lock" over a mapped block volume, a pod) is detached on its last
// close; staging again before that takes it back instead of attaching a second device.
func TestLoopDetachWhileOpen(t *testing.T) {
	requireLoops(t)
	m := NewLinux()
	dir := t.TempDir()
	file := filepath.Join(dir, "block.img")
	writeSized(t, file, 1<<20)
	t.Cleanup(func() { _ = m.DetachLoop(file) })
	autoclear := func(lp Loop) string {
		b, err := os.ReadFile(filepath.Join(sysBlock, filepath.Base(lp.Path), "loop", "autoclear"))
		if err != nil {
			return "detached"
		}
		return strings.TrimSpace(string(b))
	}
	lp, err := m.AttachLoop(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := autoclear(lp); got != "0" {
		t.Fatalf("autoclear = %s after attach; want 0 (a bind mount does not hold the device open)", got)
	}
	hold := func() *os.File {
		f, err := os.Open(lp.Path)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	// Detach while held, then attach again: the same device, autoclear taken back.
	f := hold()
	if err := m.DetachLoop(file); err != nil {
		t.Fatal(err)
	}
	if got := autoclear(lp); got != "1" {
		t.Fatalf("autoclear = %s after a detach while open; want 1 (detach on last close)", got)
	}
	again, err := m.AttachLoop(file)
	if err != nil || again != lp {
		t.Fatalf("AttachLoop while the detach is pending = %+v, %v; want %+v", again, err, lp)
	}
	f.Close()
	if got := autoclear(lp); got != "0" {
		t.Fatalf("after the last close the device is %s; want still attached (autoclear 0)", got)
	}
	if n := sysfsLoops(t, file); n != 1 {
		t.Fatalf("%d loops over the file; want 1", n)
	}

	// Detach while held, then the holder goes: the device goes with it.
	f = hold()
	if err := m.DetachLoop(file); err != nil {
		t.Fatal(err)
	}
	if n := sysfsLoops(t, file); n != 1 {
		t.Fatalf("%d loops over the file while held; want 1 until the last close", n)
	}
	f.Close()
	if n := sysfsLoops(t, file); n != 0 {
		t.Fatalf("%d loops over the file after the last close; want 0", n)
	}
}

// TestLoopAttachesTheCheckedFile: AttachLoopFile attaches the descriptor the caller checked;
// when the name has been swapped since (here for a hard link of another volume's file, the
// race between the node's link-count check and the attach) it attaches nothing, and the other
// file gets no loop device. Before, the node's attach looked the name up again and attached
// the file swapped in.
func TestLoopAttachesTheCheckedFile(t *testing.T) {
	testLoopMounters(t, func(t *testing.T, m Mounter, _ func() Mounter, _ bool) {
		dir := t.TempDir()
		own, victim := filepath.Join(dir, "block.img"), filepath.Join(dir, "victim.img")
		writeSized(t, own, 1<<20)
		writeSized(t, victim, 1<<20)
		t.Cleanup(func() { _ = m.DetachLoop(own); _ = m.DetachLoop(victim) })
		checked, err := os.OpenFile(own, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer checked.Close()
		// The swap: the name now is a hard link of the victim's file.
		if err := os.Link(victim, own+".tmp"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(own+".tmp", own); err != nil {
			t.Fatal(err)
		}
		if lp, err := m.AttachLoopFile(own, checked); err == nil {
			t.Errorf("AttachLoopFile after the swap = %+v; want an error", lp)
		}
		if lp, ok, err := m.(finder).FindLoop(victim); err != nil || ok {
			t.Errorf("the swapped-in file got a loop device: %+v, %v, %v", lp, ok, err)
		}
		// Unswapped, the checked file is attached.
		if err := os.Remove(own); err != nil {
			t.Fatal(err)
		}
		writeSized(t, own, 1<<20)
		again, err := os.OpenFile(own, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		lp, err := m.AttachLoopFile(own, again)
		if err != nil {
			t.Fatalf("AttachLoopFile of the checked file: %v", err)
		}
		if got, ok, err := m.(finder).FindLoop(own); err != nil || !ok || got != lp {
			t.Errorf("FindLoop(%s) = %+v, %v, %v; want %+v", own, got, ok, err, lp)
		}
	})
}
