// Package mount does the node plugin's bind mounts and loop devices: the Mounter interface,
// a Linux implementation using mount(2) and the loop ioctls directly (no mount(8), no
// losetup(8)) with /proc/self/mountinfo and /sys/block, and an in-memory fake for unit tests.
package mount

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// MountPoint is one mount as /proc/self/mountinfo describes it (proc(5)).
type MountPoint struct {
	// Path is where the mount is, absolute.
	Path string
	// Root is the directory (or file) of the source filesystem mounted at Path; for a bind
	// mount, the source's path inside its filesystem.
	Root string
	// Source and FSType are the mount source and filesystem type, e.g. "/dev/sda1", "ext4".
	Source string
	FSType string
	// ReadOnly is true when the mount itself (not only its filesystem) is read-only.
	ReadOnly bool
	// Device is "major:minor" of the block device node mounted at Path (a bind mount of
	// /dev/loopN, or of a path that is one), e.g. "7:3"; empty for anything else.
	Device string
}

// Mounter makes and inspects bind mounts and the loop devices that make a block volume's
// backing file a real block device (the kubelet treats a block volume's path as mapped only
// when it is a device node). Implementations are safe for concurrent use.
type Mounter interface {
	// BindMount mounts source (a directory or a regular file) onto target, which must exist
	// and be of the same kind. readOnly makes the new mount read-only; on failure nothing
	// stays mounted.
	BindMount(source, target string, readOnly bool) error
	// Unmount removes the topmost mount at target; target not being a mount point is an
	// error (callers check MountPoint first).
	Unmount(target string) error
	// MountPoint returns the topmost mount whose mount point is exactly path, or nil when
	// path is not a mount point or does not exist.
	MountPoint(path string) (*MountPoint, error)
	// AttachLoop returns the loop device whose backing file is file (a regular file),
	// attaching a free one only when there is none yet, also when an earlier process
	// attached it: calling it again never attaches a second device. The device's size is the
	// file's at attach time (rounded down to 512 bytes) and stays so until ResizeLoop. It
	// stays attached until DetachLoop, whatever process asks.
	AttachLoop(file string) (Loop, error)
	// DetachLoop detaches every loop device whose backing file is file; none is success. A
	// device someone still has open is detached by the kernel on its last close.
	DetachLoop(file string) error
	// ResizeLoop makes the size of file's loop device follow the file's size (after it grew)
	// and returns the device's size in bytes. Errors wrap ErrNoLoop when none is attached.
	ResizeLoop(file string) (int64, error)
	// BlockSize returns the size in bytes of the block device at path (a device node or a
	// mount of one, such as a published block volume), or of the file for a regular file.
	// Errors: path cannot be opened (wrapping os.ErrNotExist when missing) or is neither.
	BlockSize(path string) (int64, error)
}

// Linux is the real Mounter: mount(2) with MS_BIND, and MS_BIND|MS_REMOUNT|MS_RDONLY for a
// read-only bind (the kernel ignores MS_RDONLY on the first bind call), and the loop ioctls
// on /dev/loop-control and /dev/loopN (loop.go). It needs CAP_SYS_ADMIN (and CAP_MKNOD where
// /dev lacks a loop node). Use a pointer; it must not be copied.
type Linux struct {
	// MountInfo is the mountinfo file to read; empty means /proc/self/mountinfo.
	MountInfo string

	// loopMu serialises this process's loop scans and attaches, so two calls for one file
	// cannot both find none and attach two devices.
	loopMu sync.Mutex
}

var _ Mounter = (*Linux)(nil)

// NewLinux returns a Mounter for this process's mount namespace.
func NewLinux() *Linux { return &Linux{} }

// BindMount implements Mounter.
func (l *Linux) BindMount(source, target string, readOnly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", source, target, err)
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		// Never leave a writable mount behind where a read-only one was asked for.
		if uerr := unix.Unmount(target, 0); uerr != nil {
			return fmt.Errorf("remount %s read-only: %w (and unmount: %v)", target, err, uerr)
		}
		return fmt.Errorf("remount %s read-only: %w", target, err)
	}
	return nil
}

// Unmount implements Mounter.
func (l *Linux) Unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// MountPoint implements Mounter.
func (l *Linux) MountPoint(path string) (*MountPoint, error) {
	p, err := filepath.EvalSymlinks(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		// A broken mount (ENOTCONN, ESTALE) cannot be resolved but can still be listed.
		p = filepath.Clean(path)
	}
	name := l.MountInfo
	if name == "" {
		name = "/proc/self/mountinfo"
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	mounts, err := ParseMountInfo(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	var top *MountPoint
	for i := range mounts {
		// Later lines are mounted later, so the last match is the one visible at p.
		if mounts[i].Path == p {
			top = &mounts[i]
		}
	}
	var st unix.Stat_t
	if top != nil && unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
		top.Device = devString(st.Rdev)
	}
	return top, nil
}

// ParseMountInfo parses the mountinfo format of proc(5):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func ParseMountInfo(r io.Reader) ([]MountPoint, error) {
	var out []MountPoint
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 7 || sep < 0 || sep+2 >= len(fields) {
			return nil, fmt.Errorf("malformed mountinfo line %q", line)
		}
		ro := false
		for _, o := range strings.Split(fields[5], ",") {
			if o == "ro" {
				ro = true
			}
		}
		out = append(out, MountPoint{
			Root: unescape(fields[3]), Path: unescape(fields[4]),
			FSType: fields[sep+1], Source: unescape(fields[sep+2]), ReadOnly: ro,
		})
	}
	return out, sc.Err()
}

// unescape undoes the kernel's octal escaping of space, tab, newline and backslash.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
