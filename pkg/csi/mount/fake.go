package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Fake is an in-memory Mounter for unit tests. It checks what the kernel would (source and
// target exist and are both directories or both files) and records mounts without touching
// the file system, so tests run unprivileged. Safe for concurrent use.
//
// Its loop devices are regular files named loopN (N the lowest free index, like
// LOOP_CTL_GET_FREE) in DevDir, or beside the backing file when DevDir is empty, whose size
// is the device's as the kernel would report it: the backing file's rounded down to 512
// bytes at attach and at ResizeLoop, 0 once detached. A mount of a device file, or of a path
// where one is mounted, reports the device's number (7:N) as MountPoint.Device, like a bind
// mount of /dev/loopN does. It has no openers, so DetachLoop detaches at once. Its state is
// the "kernel's": a new NodeServer on the same Fake is a restarted plugin.
type Fake struct {
	// DevDir is where the device files go; set it before the first AttachLoop.
	DevDir string

	mu     sync.Mutex
	mounts map[string][]MountPoint
	// devices maps a device file's path to its number, "7:N"; loops maps a backing file
	// (canonical path) to the index of its device, and bound the index to the device path.
	devices map[string]string
	loops   map[string]int
	bound   map[int]string
}

var _ Mounter = (*Fake)(nil)

// NewFake returns a Fake with nothing mounted and no loop device attached.
func NewFake() *Fake {
	return &Fake{mounts: map[string][]MountPoint{}, devices: map[string]string{}, loops: map[string]int{}, bound: map[int]string{}}
}

// fdTarget turns a FdPath into the path its descriptor was opened on, as the kernel would
// resolve it; any other path is returned as it is.
func fdTarget(p string) string {
	if _, ok := procFd(p); !ok {
		return p
	}
	if t, err := os.Readlink(p); err == nil {
		return t
	}
	return p
}

// BindMount implements Mounter.
func (f *Fake) BindMount(source, target string, readOnly bool) error {
	source, target = fdTarget(source), fdTarget(target)
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
	s, t := filepath.Clean(source), filepath.Clean(target)
	root, dev := s, f.devices[s]
	if stack := f.mounts[s]; len(stack) > 0 {
		// A bind of a bind mounts what is mounted there.
		root, dev = stack[len(stack)-1].Root, stack[len(stack)-1].Device
	}
	f.mounts[t] = append(f.mounts[t], MountPoint{Path: t, Root: root, Source: "fake", FSType: "fake", ReadOnly: readOnly, Device: dev})
	return nil
}

// Unmount implements Mounter.
func (f *Fake) Unmount(target string) error {
	target = fdTarget(target)
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
	path = fdTarget(path)
	f.mu.Lock()
	defer f.mu.Unlock()
	stack := f.mounts[filepath.Clean(path)]
	if len(stack) == 0 {
		return nil, nil
	}
	m := stack[len(stack)-1]
	return &m, nil
}

// Shows implements Mounter: the topmost mount at path has source's path as its root (the
// fake's mounts are of paths; a device file's mount too).
func (f *Fake) Shows(path, source string) (bool, error) {
	mp, err := f.MountPoint(path)
	if err != nil || mp == nil {
		return false, err
	}
	return mp.Root == filepath.Clean(fdTarget(source)), nil
}

// ShownFile implements Mounter: the identity of the topmost mount's root path, as the file
// system has it now. A root that is gone (its source removed while mounted, which the kernel
// allows) shows a file no path names any more: an identity that matches no file (inode 0).
func (f *Fake) ShownFile(path string) (FileID, bool, error) {
	mp, err := f.MountPoint(path)
	if err != nil || mp == nil {
		return FileID{}, false, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(mp.Root, &st); errors.Is(err, unix.ENOENT) {
		return FileID{}, true, nil
	} else if err != nil {
		return FileID{}, false, fmt.Errorf("stat the root %s of the mount at %s: %w", mp.Root, path, err)
	}
	return FileIDOf(&st), true, nil
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

// AttachLoopFile implements Mounter: checked must be the file file names.
func (f *Fake) AttachLoopFile(file string, checked *os.File) (Loop, error) {
	if checked != nil {
		a, err := os.Lstat(file)
		if err != nil {
			return Loop{}, fmt.Errorf("attach loop to %s: %w", file, err)
		}
		b, err := checked.Stat()
		if err != nil || !os.SameFile(a, b) {
			return Loop{}, fmt.Errorf("attach loop to %s: the name no longer names the file checked (%v)", file, err) //nolint:errorlint // err is nil when only the file differs: %w would print %!w(<nil>)
		}
	}
	return f.AttachLoop(file)
}

// AttachLoop implements Mounter.
func (f *Fake) AttachLoop(file string) (Loop, error) {
	key, size, err := fakeBacking(file)
	if err != nil {
		return Loop{}, fmt.Errorf("attach loop to %s: %w", file, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.loops[key]; ok {
		return Loop{Path: f.bound[n], Device: f.devices[f.bound[n]]}, nil
	}
	n := 0
	for ; ; n++ {
		if _, used := f.bound[n]; !used {
			break
		}
	}
	dir := f.DevDir
	if dir == "" {
		dir = filepath.Dir(key)
	}
	p := filepath.Join(dir, fmt.Sprintf("loop%d", n))
	if err := sizeFile(p, size/512*512); err != nil {
		return Loop{}, fmt.Errorf("attach loop to %s: %w", file, err)
	}
	f.devices[p] = fmt.Sprintf("7:%d", n)
	f.loops[key], f.bound[n] = n, p
	return Loop{Path: p, Device: f.devices[p]}, nil
}

// DetachLoop implements Mounter.
func (f *Fake) DetachLoop(file string) error {
	key, _, err := fakeBacking(file)
	if errors.Is(err, os.ErrNotExist) {
		key, err = filepath.Abs(file)
	}
	if err != nil {
		return fmt.Errorf("detach loop of %s: %w", file, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.loops[key]
	if !ok {
		return nil
	}
	if err := sizeFile(f.bound[n], 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("detach loop of %s: %w", file, err)
	}
	delete(f.loops, key)
	delete(f.bound, n)
	return nil
}

// ResizeLoop implements Mounter.
func (f *Fake) ResizeLoop(file string) (int64, error) {
	key, size, err := fakeBacking(file)
	if err != nil {
		return 0, fmt.Errorf("resize loop of %s: %w", file, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.loops[key]
	if !ok {
		return 0, fmt.Errorf("resize loop of %s: %w", file, ErrNoLoop)
	}
	size = size / 512 * 512
	if err := sizeFile(f.bound[n], size); err != nil {
		return 0, fmt.Errorf("resize loop of %s: %w", file, err)
	}
	return size, nil
}

// BlockSize implements Mounter: the size of the file mounted at path (a device file's is its
// device's), or of the file at path when nothing is mounted there.
func (f *Fake) BlockSize(path string) (int64, error) {
	p := filepath.Clean(fdTarget(path))
	f.mu.Lock()
	if stack := f.mounts[p]; len(stack) > 0 {
		p = stack[len(stack)-1].Root
	}
	f.mu.Unlock()
	fi, err := os.Stat(p)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("size of %s: not a block device or a regular file", path)
	}
	return fi.Size(), nil
}

// FindLoop returns the loop device attached to file, and whether there is one (as
// Linux.FindLoop).
func (f *Fake) FindLoop(file string) (Loop, bool, error) {
	key, _, err := fakeBacking(file)
	if errors.Is(err, os.ErrNotExist) {
		return Loop{}, false, nil
	}
	if err != nil {
		return Loop{}, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.loops[key]
	if !ok {
		return Loop{}, false, nil
	}
	return Loop{Path: f.bound[n], Device: f.devices[f.bound[n]]}, true, nil
}

// Loops returns how many loop devices are attached.
func (f *Fake) Loops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.loops)
}

// fakeBacking resolves file as backingFile does (a link as its last element is refused,
// ErrSymlink) and returns its size.
func fakeBacking(file string) (string, int64, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", 0, err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", 0, err
	}
	p := filepath.Join(dir, filepath.Base(abs))
	fi, err := os.Lstat(p)
	if err != nil {
		return "", 0, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return "", 0, fmt.Errorf("%s: %w", p, ErrSymlink)
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", p)
	}
	return p, fi.Size(), nil
}

func sizeFile(p string, size int64) error {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
