// Package mount does the node plugin's bind mounts and loop devices: the Mounter interface,
// a Linux implementation using mount(2) and the loop ioctls directly (no mount(8), no
// losetup(8)) with /proc/self/mountinfo and /sys/block, and an in-memory fake for unit tests.
package mount

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// MountPoint is one mount as /proc/self/mountinfo describes it (proc(5)).
type MountPoint struct {
	// ID is the mount's unique ID (mountinfo's first field, statx's stx_mnt_id); 0 when
	// unknown (the fake).
	ID int
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
	// stays mounted. Either may be a FdPath: the descriptor's file is used, exactly.
	BindMount(source, target string, readOnly bool) error
	// Unmount removes the topmost mount at target; target not being a mount point is an
	// error (callers check MountPoint first). target's last element is never followed; a
	// FdPath target is the mount the descriptor is on (detached lazily: the descriptor
	// holds it).
	Unmount(target string) error
	// MountPoint returns the topmost mount whose mount point is exactly path (its last
	// element not followed; a FdPath: the descriptor's), or nil when path is not a mount
	// point or does not exist.
	MountPoint(path string) (*MountPoint, error)
	// AttachLoop returns the loop device whose backing file is file (a regular file),
	// attaching a free one only when there is none yet, also when an earlier process
	// attached it: calling it again never attaches a second device. The device's size is the
	// file's at attach time (rounded down to 512 bytes) and stays so until ResizeLoop. It
	// stays attached until DetachLoop, whatever process asks.
	AttachLoop(file string) (Loop, error)
	// AttachLoopFile is AttachLoop of checked, file opened (read-write) and checked by the
	// caller: the device is bound to that descriptor, never to what file names later, and
	// file must still name it (else an error, nothing attached). checked nil: AttachLoop.
	AttachLoopFile(file string, checked *os.File) (Loop, error)
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
	// FindLoop returns the loop device attached to file, and whether there is one; it
	// attaches nothing. A missing file has none. The node uses it to tell whether a mount
	// of a device is this volume's (its Device is the loop's).
	FindLoop(file string) (Loop, bool, error)
	// Shows reports whether path is a mount point whose mounted root is source itself (the
	// same file: device and inode), as a bind mount of source, or a bind of such a bind,
	// makes it. Both may be FdPath paths; path's last element is never followed. It is how
	// the node proves that a mount is of one volume's data folder or backing file, and not
	// of anything else (another volume's, or what someone else mounted).
	Shows(path, source string) (bool, error)
	// ShownFile returns the identity (device and inode) of the file the topmost mount at
	// path shows, its mounted root, as Shows compares it, and false when path is not a mount
	// point (or does not exist). path may be a FdPath; its last element is never followed.
	// A caller that compares one mount with many candidate files stats each candidate
	// (FileIDOf) and holds no descriptor per candidate.
	ShownFile(path string) (FileID, bool, error)
}

// FileID is a file's identity on this machine: the device of its file system and its inode
// number (stat(2)'s st_dev and st_ino). Two paths with the same FileID are the same file; a
// bind mount's root has its source's.
type FileID struct {
	Dev, Ino uint64
}

// FileIDOf is the FileID of a stat(2) result.
func FileIDOf(st *unix.Stat_t) FileID { return FileID{Dev: uint64(st.Dev), Ino: st.Ino} }

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

// Shows implements Mounter: path must be a mount point, and the file opened there (the
// mount's root) and source must have the same device and inode; a bind mount shares both
// with its source.
func (l *Linux) Shows(path, source string) (bool, error) {
	mp, err := l.MountPoint(path)
	if err != nil || mp == nil {
		return false, err
	}
	at, err := statNoFollow(path)
	if err != nil {
		return false, err
	}
	src, err := statNoFollow(source)
	if err != nil {
		return false, err
	}
	return at.Dev == src.Dev && at.Ino == src.Ino, nil
}

// ShownFile implements Mounter: the file opened at the mount point path is the mount's root.
func (l *Linux) ShownFile(path string) (FileID, bool, error) {
	mp, err := l.MountPoint(path)
	if err != nil || mp == nil {
		return FileID{}, false, err
	}
	st, err := statNoFollow(path)
	if err != nil {
		return FileID{}, false, err
	}
	return FileIDOf(&st), true, nil
}

// statNoFollow stats p without following its last element, or, for a FdPath, the
// descriptor's file.
func statNoFollow(p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	var err error
	if fd, ok := procFd(p); ok {
		err = unix.Fstat(fd, &st)
	} else {
		err = unix.Fstatat(unix.AT_FDCWD, p, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return st, fmt.Errorf("stat %s: %w", p, err)
	}
	return st, nil
}

// BindMount implements Mounter. source and target may be FdPath paths (what the node
// service hands in, opened below their roots without following links): the mount is then
// made with open_tree(2) on the source descriptor and move_mount(2) onto the target
// descriptor, read-only already before it is attached (mount_setattr(2)), so no path is
// looked up again between the check and the mount. On kernels without these calls
// (ENOSYS: before 5.12) it falls back to mount(2) with MS_BIND, and MS_BIND|MS_REMOUNT|
// MS_RDONLY for a read-only bind (the kernel ignores MS_RDONLY on the first bind call).
func (l *Linux) BindMount(source, target string, readOnly bool) error {
	err := bindTree(source, target, readOnly)
	if !errors.Is(err, unix.ENOSYS) {
		if err != nil {
			return fmt.Errorf("bind mount %s on %s: %w", source, target, err)
		}
		return nil
	}
	if _, ok := procFd(target); ok && readOnly {
		// The remount would resolve the descriptor to the mount under the new one.
		return fmt.Errorf("bind mount %s on %s read-only: needs open_tree/mount_setattr (Linux 5.12): %w", source, target, err)
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", source, target, err)
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		// Never leave a writable mount behind where a read-only one was asked for.
		if uerr := unix.Unmount(target, 0); uerr != nil {
			return fmt.Errorf("remount %s read-only: %w (and unmount: %v)", target, err, uerr) //nolint:errorlint // the remount's error is the cause callers classify; the unmount's is context
		}
		return fmt.Errorf("remount %s read-only: %w", target, err)
	}
	return nil
}

// bindTree clones the mount at source (open_tree OPEN_TREE_CLONE: a non-recursive bind),
// makes the clone read-only when asked, and attaches it at target (move_mount). A path that
// is not a FdPath is opened O_PATH (following links, as mount(2) did).
func bindTree(source, target string, readOnly bool) error {
	src, closeSrc, err := pathFd(source)
	if err != nil {
		return err
	}
	defer closeSrc()
	tgt, closeTgt, err := pathFd(target)
	if err != nil {
		return err
	}
	defer closeTgt()
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	if readOnly {
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			if errors.Is(err, unix.ENOSYS) {
				return err
			}
			return fmt.Errorf("mount_setattr read-only: %w", err)
		}
	}
	if err := unix.MoveMount(tree, "", tgt, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// pathFd returns the descriptor of a FdPath (closing it is the caller's owner's job), or of
// path opened O_PATH, with the function that closes what it opened.
func pathFd(path string) (int, func(), error) {
	if fd, ok := procFd(path); ok {
		return fd, func() {}, nil
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, func() { unix.Close(fd) }, nil
}

// Unmount implements Mounter: umount2(2) with UMOUNT_NOFOLLOW, so a link as target's last
// element is never followed (callers make sure no element before it is one). A FdPath
// target unmounts exactly the mount its descriptor was opened on; since that open
// descriptor keeps the mount busy, it is detached (MNT_DETACH), which completes as soon as
// the caller closes it unless someone else still uses the mount.
func (l *Linux) Unmount(target string) error {
	flags := unix.UMOUNT_NOFOLLOW
	if _, ok := procFd(target); ok {
		flags = unix.MNT_DETACH
	}
	if err := unix.Unmount(target, flags); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// MountPoint implements Mounter. The mount is found by its ID: statx(2) of path (its last
// element not followed; a FdPath stats the descriptor) says whether path is the root of a
// mount (STATX_ATTR_MOUNT_ROOT) and which (STATX_MNT_ID), and the mountinfo line with that
// ID describes it; no path is resolved twice and none compared as text. Where statx cannot
// tell (a broken mount: ENOTCONN, ESTALE; a kernel before 5.8) the topmost mountinfo line
// whose mount point is the clean path is taken.
func (l *Linux) MountPoint(path string) (*MountPoint, error) {
	dirfd, name, flags := unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW
	if fd, ok := procFd(path); ok {
		dirfd, name, flags = fd, "", unix.AT_EMPTY_PATH
	}
	var sx unix.Statx_t
	err := unix.Statx(dirfd, name, flags|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_MODE|unix.STATX_MNT_ID, &sx)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return nil, nil
	case err == nil && sx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && sx.Mask&unix.STATX_MNT_ID != 0:
		if sx.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
			return nil, nil
		}
		top, err := l.mountByID(sx.Mnt_id)
		if top != nil && sx.Mode&unix.S_IFMT == unix.S_IFBLK {
			top.Device = devString(unix.Mkdev(sx.Rdev_major, sx.Rdev_minor))
		}
		return top, err
	}
	// A broken mount cannot be stat'ed but can still be listed.
	p := filepath.Clean(path)
	top, err := l.topmostAt(p)
	var st unix.Stat_t
	if top != nil && unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
		top.Device = devString(st.Rdev)
	}
	return top, err
}

// mountByID returns the mount whose mount ID is id (unique while it is mounted), or nil
// when there is none (unmounted meanwhile). The whole table is read even after the match,
// so a malformed line anywhere is an error, as for every other lookup.
func (l *Linux) mountByID(id uint64) (*MountPoint, error) {
	mounts, err := l.mounts(func(i *mountinfo.Info) (skip, stop bool) {
		return i.ID <= 0 || uint64(i.ID) != id, false
	})
	if err != nil || len(mounts) == 0 {
		return nil, err
	}
	return &mounts[0], nil
}

// topmostAt returns the topmost mount whose mount point is p (clean, absolute), or nil
// when there is none. mountinfo lists mounts in the order they were mounted, so the last
// line for p is the one visible there (mountinfo.SingleEntryFilter would stop at the
// first: the one hidden under the others).
func (l *Linux) topmostAt(p string) (*MountPoint, error) {
	mounts, err := l.mounts(func(i *mountinfo.Info) (skip, stop bool) {
		return i.Mountpoint != p, false
	})
	if err != nil || len(mounts) == 0 {
		return nil, err
	}
	return &mounts[len(mounts)-1], nil
}

// mounts reads the lines of this process's mount table that filter keeps (nil: all).
func (l *Linux) mounts(filter mountinfo.FilterFunc) ([]MountPoint, error) {
	name := l.MountInfo
	if name == "" {
		name = "/proc/self/mountinfo"
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	mounts, err := readMounts(f, filter)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return mounts, nil
}

// ParseMountInfo reads a mount table in the mountinfo format of proc(5), one mount a line
// in the order they were mounted, with github.com/moby/sys/mountinfo (escaped paths
// unescaped; a line of more than 64 KiB, or one without the "-" separator and the three
// fields after it, is an error):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func ParseMountInfo(r io.Reader) ([]MountPoint, error) {
	return readMounts(r, nil)
}

// readMounts parses r with the library and keeps what filter keeps (nil: all).
func readMounts(r io.Reader, filter mountinfo.FilterFunc) ([]MountPoint, error) {
	infos, err := mountinfo.GetMountsFromReader(r, filter)
	if err != nil {
		return nil, err
	}
	out := make([]MountPoint, 0, len(infos))
	for _, i := range infos {
		out = append(out, MountPoint{
			ID: i.ID, Path: i.Mountpoint, Root: i.Root, Source: i.Source, FSType: i.FSType,
			ReadOnly: slices.Contains(strings.Split(i.Options, ","), "ro"),
		})
	}
	return out, nil
}
