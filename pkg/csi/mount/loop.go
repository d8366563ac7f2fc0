package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoLoop is what ResizeLoop wraps when no loop device is attached to the file.
var ErrNoLoop = errors.New("no loop device is attached to the file")

// Loop is a loop block device attached to a backing file.
type Loop struct {
	// Path is the device node, e.g. "/dev/loop3".
	Path string
	// Device is the device number "major:minor", e.g. "7:3": what MountPoint.Device reports
	// for a mount of Path.
	Device string
}

const (
	loopControl = "/dev/loop-control"
	sysBlock    = "/sys/block"
	// attachTries bounds the LOOP_CTL_GET_FREE / LOOP_CONFIGURE loop: another process (the
	// kubelet's losetup, say) may take the free device between the two calls (EBUSY).
	attachTries = 8
)

// AttachLoop implements Mounter. It first scans /sys/block/loop*/loop/backing_file for a
// loop already attached to file (one left by an earlier process, so a restarted plugin
// neither attaches twice nor leaks), checking the inode with LOOP_GET_STATUS64; a loop whose
// detach is pending (autoclear set by LOOP_CLR_FD while others held it open) is taken back.
// Otherwise it takes a free device (LOOP_CTL_GET_FREE on /dev/loop-control) and binds it
// with LOOP_CONFIGURE, or LOOP_SET_FD + LOOP_SET_STATUS64 on kernels without it.
//
// LO_FLAGS_AUTOCLEAR is deliberately NOT set: it detaches the device on its last close, and
// a bind mount of the device node does not hold it open, so the device would vanish as soon
// as this call closes its descriptor (or, if it kept one, when the plugin restarts), leaving
// the staged and published paths on an unbound device whose number the next attach of any
// file may reuse. The device lives until DetachLoop. A missing /dev/loopN node (a container
// whose /dev was populated before the device existed) is created with mknod(2).
func (l *Linux) AttachLoop(file string) (Loop, error) { return l.AttachLoopFile(file, nil) }

// AttachLoopFile implements Mounter: with checked set, the device is bound to that open
// descriptor (LOOP_CONFIGURE takes a descriptor), so what is attached is the file the caller
// checked, whatever file's name points at meanwhile.
func (l *Linux) AttachLoopFile(file string, checked *os.File) (Loop, error) {
	l.loopMu.Lock()
	defer l.loopMu.Unlock()
	path, st, err := backingFile(file)
	if err != nil {
		return Loop{}, fmt.Errorf("attach loop to %s: %w", file, err)
	}
	if checked != nil {
		var cst unix.Stat_t
		if err := unix.Fstat(int(checked.Fd()), &cst); err != nil || cst.Ino != st.Ino || cst.Dev != st.Dev {
			return Loop{}, fmt.Errorf("attach loop to %s: the name no longer names the file checked (%v)", file, err) //nolint:errorlint // err is nil when only the inode differs: %w would print %!w(<nil>)
		}
	}
	loops, err := l.loopsOf(path, &st)
	if err != nil {
		return Loop{}, fmt.Errorf("attach loop to %s: %w", file, err)
	}
	if len(loops) > 0 {
		return loops[0], nil
	}
	var fd int
	if checked != nil {
		fd = int(checked.Fd())
	} else {
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return Loop{}, fmt.Errorf("attach loop to %s: %w", file, err)
		}
		defer unix.Close(fd)
	}
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil || fst.Ino != st.Ino || fst.Dev != st.Dev {
		return Loop{}, fmt.Errorf("attach loop to %s: the file was replaced while it was opened (%v)", file, err) //nolint:errorlint // err is nil when only the inode differs: %w would print %!w(<nil>)
	}
	ctl, err := unix.Open(loopControl, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return Loop{}, fmt.Errorf("attach loop to %s: %w", file, err)
	}
	defer unix.Close(ctl)
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return Loop{}, fmt.Errorf("attach loop to %s: LOOP_CTL_GET_FREE: %w", file, err)
		}
		lp, err := configureLoop(n, fd, path)
		if errors.Is(err, unix.EBUSY) && try < attachTries {
			continue // taken by someone else since GET_FREE
		}
		if err != nil {
			return Loop{}, fmt.Errorf("attach loop to %s: %w", file, err)
		}
		return lp, nil
	}
}

// configureLoop binds loop device n to the open backing file fd (named path).
func configureLoop(n, fd int, path string) (Loop, error) {
	dev, lp, err := openLoop(n)
	if err != nil {
		return Loop{}, err
	}
	defer unix.Close(dev)
	cfg := unix.LoopConfig{Fd: uint32(fd)}
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], path)
	err = unix.IoctlLoopConfigure(dev, &cfg)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		if err != nil {
			return Loop{}, fmt.Errorf("LOOP_CONFIGURE %s: %w", lp.Path, err)
		}
		return lp, nil
	}
	// Before Linux 5.8 there is no LOOP_CONFIGURE: bind, then name.
	if err := unix.IoctlSetInt(dev, unix.LOOP_SET_FD, fd); err != nil {
		return Loop{}, fmt.Errorf("LOOP_SET_FD %s: %w", lp.Path, err)
	}
	if err := unix.IoctlLoopSetStatus64(dev, &cfg.Info); err != nil {
		_ = unix.IoctlSetInt(dev, unix.LOOP_CLR_FD, 0)
		return Loop{}, fmt.Errorf("LOOP_SET_STATUS64 %s: %w", lp.Path, err)
	}
	return lp, nil
}

// DetachLoop implements Mounter: LOOP_CLR_FD on every loop device whose backing file is
// file (found in sysfs, so it works after a restart), also when file was deleted since. The
// kernel detaches at once when nobody else has the device open, otherwise on its last close
// (it sets autoclear), so a device the kubelet still holds goes when the kubelet lets go.
// No loop attached is success.
func (l *Linux) DetachLoop(file string) error {
	l.loopMu.Lock()
	defer l.loopMu.Unlock()
	path, st, err := backingFile(file)
	var stp *unix.Stat_t
	switch {
	case err == nil:
		stp = &st
	case errors.Is(err, os.ErrNotExist):
		// Gone: match its name, and its "(deleted)" name.
		if path, err = filepath.Abs(file); err != nil {
			return fmt.Errorf("detach loop of %s: %w", file, err)
		}
	default:
		return fmt.Errorf("detach loop of %s: %w", file, err)
	}
	loops, err := l.loopsOf(path, stp)
	if err != nil {
		return fmt.Errorf("detach loop of %s: %w", file, err)
	}
	if stp != nil {
		// Loops over an earlier file at this path (the data folder was wiped, or the file
		// replaced, while the volume was staged) show "path (deleted)": AttachLoop never
		// takes them back, so only this detaches them.
		gone, err := l.deletedLoopsOf(path)
		if err != nil {
			return fmt.Errorf("detach loop of %s: %w", file, err)
		}
		loops = append(loops, gone...)
	}
	for _, lp := range loops {
		if err := clearLoop(lp); err != nil {
			return fmt.Errorf("detach loop of %s: %w", file, err)
		}
	}
	return nil
}

func clearLoop(lp Loop) error {
	n, err := loopIndex(lp.Path)
	if err != nil {
		return err
	}
	dev, _, err := openLoop(n)
	if err != nil {
		return err
	}
	defer unix.Close(dev)
	if err := unix.IoctlSetInt(dev, unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("LOOP_CLR_FD %s: %w", lp.Path, err)
	}
	return nil
}

// ResizeLoop implements Mounter: LOOP_SET_CAPACITY on the loop device of file, so its size
// follows the file's, and the size the device has then (BLKGETSIZE64), in bytes. Errors wrap
// ErrNoLoop when no loop is attached to file.
func (l *Linux) ResizeLoop(file string) (int64, error) {
	l.loopMu.Lock()
	defer l.loopMu.Unlock()
	path, st, err := backingFile(file)
	if err != nil {
		return 0, fmt.Errorf("resize loop of %s: %w", file, err)
	}
	loops, err := l.loopsOf(path, &st)
	if err != nil {
		return 0, fmt.Errorf("resize loop of %s: %w", file, err)
	}
	if len(loops) == 0 {
		return 0, fmt.Errorf("resize loop of %s: %w", file, ErrNoLoop)
	}
	var size int64
	for _, lp := range loops {
		n, err := loopIndex(lp.Path)
		if err != nil {
			return 0, err
		}
		dev, _, err := openLoop(n)
		if err != nil {
			return 0, fmt.Errorf("resize loop of %s: %w", file, err)
		}
		err = unix.IoctlSetInt(dev, unix.LOOP_SET_CAPACITY, 0)
		if err == nil {
			size, err = blkGetSize64(dev)
		}
		unix.Close(dev)
		if err != nil {
			return 0, fmt.Errorf("resize loop of %s: %s: %w", file, lp.Path, err)
		}
	}
	return size, nil
}

// FindLoop returns the loop device attached to file, and whether there is one. It is not
// part of Mounter: the node service only needs AttachLoop, which finds first; tests and tools
// use it to check that nothing leaked.
func (l *Linux) FindLoop(file string) (Loop, bool, error) {
	l.loopMu.Lock()
	defer l.loopMu.Unlock()
	path, st, err := backingFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return Loop{}, false, nil
	}
	if err != nil {
		return Loop{}, false, fmt.Errorf("find loop of %s: %w", file, err)
	}
	loops, err := l.loopsOf(path, &st)
	if err != nil || len(loops) == 0 {
		return Loop{}, false, err
	}
	return loops[0], true, nil
}

// loopsOf lists the bound loop devices whose sysfs backing_file is path. With st, only
// those whose backing inode is st's (LOOP_GET_STATUS64) count, and a pending autoclear is
// cleared so the device stays; without st (the file is gone) "path (deleted)" matches too.
func (l *Linux) loopsOf(path string, st *unix.Stat_t) ([]Loop, error) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil, fmt.Errorf("list loop devices: %w", err)
	}
	var out []Loop
	for _, e := range entries {
		name := e.Name()
		n, err := strconv.Atoi(strings.TrimPrefix(name, "loop"))
		if !strings.HasPrefix(name, "loop") || err != nil || n < 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(sysBlock, name, "loop", "backing_file"))
		if err != nil {
			continue // unbound (no loop/ folder) or detached meanwhile
		}
		bf := strings.TrimSuffix(string(b), "\n")
		if bf != path && (st != nil || bf != path+" (deleted)") {
			continue
		}
		if st == nil {
			out = append(out, Loop{Path: loopPath(n), Device: loopDevice(n)})
			continue
		}
		lp, ok, err := checkLoop(n, st)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, lp)
		}
	}
	return out, nil
}

// deletedLoopsOf lists the bound loop devices whose sysfs backing_file is "path (deleted)".
func (l *Linux) deletedLoopsOf(path string) ([]Loop, error) {
	all, err := l.loopsOf(path, nil)
	if err != nil {
		return nil, err
	}
	var out []Loop
	for _, lp := range all {
		n, err := loopIndex(lp.Path)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(sysBlock, fmt.Sprintf("loop%d", n), "loop", "backing_file"))
		if err == nil && strings.TrimSuffix(string(b), "\n") == path+" (deleted)" {
			out = append(out, lp)
		}
	}
	return out, nil
}

// checkLoop reports whether loop n is bound to st's inode, and takes back a pending
// autoclear (LOOP_SET_STATUS64 may clear that flag) so the device is not detached under a
// volume being staged again.
func checkLoop(n int, st *unix.Stat_t) (Loop, bool, error) {
	dev, lp, err := openLoop(n)
	if err != nil {
		return Loop{}, false, err
	}
	defer unix.Close(dev)
	info, err := unix.IoctlLoopGetStatus64(dev)
	if errors.Is(err, unix.ENXIO) {
		return Loop{}, false, nil // detached meanwhile
	}
	if err != nil {
		return Loop{}, false, fmt.Errorf("LOOP_GET_STATUS64 %s: %w", lp.Path, err)
	}
	if info.Inode != st.Ino || info.Device != st.Dev {
		return Loop{}, false, nil
	}
	if info.Flags&unix.LO_FLAGS_AUTOCLEAR != 0 {
		info.Flags &^= unix.LO_FLAGS_AUTOCLEAR
		if err := unix.IoctlLoopSetStatus64(dev, info); err != nil {
			return Loop{}, false, fmt.Errorf("clear autoclear of %s: %w", lp.Path, err)
		}
	}
	return lp, true, nil
}

// openLoop opens /dev/loopN read-write, creating the node from /sys/block/loopN/dev when it
// is missing, and returns the descriptor and the Loop (device number from fstat).
func openLoop(n int) (int, Loop, error) {
	p := loopPath(n)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		if err = mknodLoop(n); err == nil {
			fd, err = unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return -1, Loop{}, fmt.Errorf("open %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, Loop{}, fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		unix.Close(fd)
		return -1, Loop{}, fmt.Errorf("%s is not a block device", p)
	}
	return fd, Loop{Path: p, Device: devString(st.Rdev)}, nil
}

func mknodLoop(n int) error {
	b, err := os.ReadFile(filepath.Join(sysBlock, fmt.Sprintf("loop%d", n), "dev"))
	if err != nil {
		return fmt.Errorf("device number of loop%d: %w", n, err)
	}
	var maj, minor uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &maj, &minor); err != nil {
		return fmt.Errorf("device number of loop%d %q: %w", n, b, err)
	}
	err = unix.Mknod(loopPath(n), unix.S_IFBLK|0o660, int(unix.Mkdev(maj, minor)))
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("mknod %s: %w", loopPath(n), err)
	}
	return nil
}

func loopPath(n int) string { return fmt.Sprintf("/dev/loop%d", n) }

func loopIndex(p string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "loop"))
	if err != nil || !strings.HasPrefix(filepath.Base(p), "loop") {
		return 0, fmt.Errorf("%s is not a loop device path", p)
	}
	return n, nil
}

// loopDevice reads "major:minor" of loop n from sysfs; "" if unreadable.
func loopDevice(n int) string {
	b, err := os.ReadFile(filepath.Join(sysBlock, fmt.Sprintf("loop%d", n), "dev"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func devString(rdev uint64) string {
	return fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev))
}

// backingFile resolves file to the absolute path the kernel shows in sysfs and checks it is
// a regular file (a loop over a folder or a device is refused). Only the folder's path is
// resolved (links in it are the administrator's); file's last element is never followed: a
// link there (a backing file replaced by one) is refused, ErrSymlink.
func backingFile(file string) (string, unix.Stat_t, error) {
	var st unix.Stat_t
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", st, err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", st, err
	}
	p := filepath.Join(dir, filepath.Base(abs))
	if err := unix.Lstat(p, &st); err != nil {
		return "", st, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return p, st, nil
	case unix.S_IFLNK:
		return "", st, fmt.Errorf("%s: %w", p, ErrSymlink)
	}
	return "", st, fmt.Errorf("%s is not a regular file", p)
}

// BlockSize implements Mounter: BLKGETSIZE64 for a device node (or a mount of one), the
// file's size for a regular file.
func (l *Linux) BlockSize(path string) (int64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("size of %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		n, err := blkGetSize64(fd)
		if err != nil {
			return 0, fmt.Errorf("size of %s: %w", path, err)
		}
		return n, nil
	case unix.S_IFREG:
		return st.Size, nil
	}
	return 0, fmt.Errorf("size of %s: not a block device or a regular file", path)
}

func blkGetSize64(fd int) (int64, error) {
	var n uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return 0, fmt.Errorf("BLKGETSIZE64: %w", errno)
	}
	return int64(n), nil
}
