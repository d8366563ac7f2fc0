package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrSymlink is what Root's methods wrap when a symbolic link (or a /proc magic link) is on
// the way to a path below the root: they follow none, so that nothing a pod or another user
// can write below the root steers a mount, an unmount or a removal elsewhere.
var ErrSymlink = errors.New("a symbolic link is on the path")

// ErrOutside is what Root's methods wrap when a path is not the root or below it.
var ErrOutside = errors.New("the path is not below the root")

// resolveBeneath is how every path below a Root is resolved (openat2(2)): never above the
// root's descriptor, no symbolic link, no magic link. Mount points below the root are crossed.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openat2Tries bounds the retries of openat2 on EAGAIN, which RESOLVE_BENEATH returns when a
// rename elsewhere in the mount raced the lookup.
const openat2Tries = 8

// Root is a directory (the kubelet's root, the volumes' data folder) below which paths are
// resolved by the kernel one descriptor at a time (openat2 with RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS), so that no symbolic link below it is followed
// and no path leaves it. The root's own path is opened as given: a link in it is the
// administrator's. Root needs Linux 5.6 (openat2). The zero Root is unusable; it does no I/O
// until a method is called. Safe for concurrent use.
type Root struct{ dir string }

// NewRoot returns the Root of dir, an absolute, clean directory path; it touches nothing.
func NewRoot(dir string) Root { return Root{dir: filepath.Clean(dir)} }

// Dir is the root's path.
func (r Root) Dir() string { return r.dir }

// Rel returns p (absolute, or relative like a relative root) relative to the root, "." for the root itself; a path not below
// the root (lexically) wraps ErrOutside.
func (r Root) Rel(p string) (string, error) {
	c := filepath.Clean(p)
	if c == r.dir {
		return ".", nil
	}
	prefix := r.dir + "/"
	if r.dir == "/" {
		prefix = "/"
	}
	if !strings.HasPrefix(c, prefix) {
		return "", fmt.Errorf("%s: %w %s", p, ErrOutside, r.dir)
	}
	return strings.TrimPrefix(c, prefix), nil
}

func (r Root) openDir() (int, error) {
	fd, err := unix.Open(r.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: r.dir, Err: err}
	}
	return fd, nil
}

// openat2 opens name below dirfd the Root's way; p names it in errors.
func openat2(dirfd int, name, p string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveBeneath}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dirfd, name, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EAGAIN) && try < openat2Tries:
			continue
		case errors.Is(err, unix.ELOOP):
			return -1, fmt.Errorf("%s: %w", p, ErrSymlink)
		case errors.Is(err, unix.EXDEV):
			return -1, fmt.Errorf("%s: %w", p, ErrOutside)
		}
		return -1, &os.PathError{Op: "openat2", Path: p, Err: err}
	}
}

// Open opens p, the root or a path below it, with open(2) flags (O_CLOEXEC is added), never
// following a link: a link on the way, also as p's last element, wraps ErrSymlink (with
// O_PATH the kernel would hand out the link itself: it is refused too). A missing element
// wraps os.ErrNotExist.
func (r Root) Open(p string, flags int, mode uint32) (*os.File, error) {
	rel, err := r.Rel(p)
	if err != nil {
		return nil, err
	}
	root, err := r.openDir()
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	fd, err := openat2(root, rel, p, flags, mode)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", p, ErrSymlink)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// Check reports whether p could be reached below the root without a link: nil when every
// element of p that exists is no link (a missing tail is fine); otherwise an error wrapping
// ErrSymlink, ErrOutside, or what the lookup met (a file where a folder should be).
func (r Root) Check(p string) error {
	f, err := r.Open(p, unix.O_PATH, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// MkdirAll creates p and its missing parents below the root (mode perm, less the umask),
// one mkdirat(2) at a time on the parent's descriptor, and returns p opened O_PATH. An
// element that is a link wraps ErrSymlink, one that is not a folder ENOTDIR; nothing is
// created past either.
func (r Root) MkdirAll(p string, perm uint32) (*os.File, error) {
	rel, err := r.Rel(p)
	if err != nil {
		return nil, err
	}
	fd, err := r.openDir()
	if err != nil {
		return nil, err
	}
	done := r.dir
	for _, e := range strings.Split(rel, "/") {
		if e == "." {
			continue
		}
		done = filepath.Join(done, e)
		if err := unix.Mkdirat(fd, e, perm); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return nil, &os.PathError{Op: "mkdirat", Path: done, Err: err}
		}
		next, err := openat2(fd, e, done, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), p), nil
}

// CreateFile returns p opened O_PATH, creating it (an empty regular file, mode perm, with
// its missing parents) when missing; an existing p is opened as it is, whatever it is (the
// caller checks), but never through a link (ErrSymlink).
func (r Root) CreateFile(p string, perm uint32) (*os.File, error) {
	f, err := r.Open(p, unix.O_PATH, 0)
	if !errors.Is(err, os.ErrNotExist) {
		return f, err
	}
	dir, err := r.MkdirAll(filepath.Dir(p), 0o750)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	fd, err := openat2(int(dir.Fd()), filepath.Base(p), p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, perm)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err == nil {
		unix.Close(fd)
	}
	return r.Open(p, unix.O_PATH, 0)
}

// Lstat stats p itself (a link is reported as one, not followed), reached below the root
// without a link.
func (r Root) Lstat(p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	dir, err := r.Open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return st, err
	}
	defer dir.Close()
	if err := unix.Fstatat(int(dir.Fd()), filepath.Base(p), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	return st, nil
}

// Remove removes p (a folder, which must be empty, or anything else; a link itself, never
// what it points to) with unlinkat(2) on its parent, reached below the root without a link.
func (r Root) Remove(p string) error {
	if filepath.Clean(p) == r.dir {
		return fmt.Errorf("remove %s: it is the root", p)
	}
	dir, err := r.Open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), filepath.Base(p), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(int(dir.Fd()), filepath.Base(p), flags); err != nil {
		return &os.PathError{Op: "unlinkat", Path: p, Err: err}
	}
	return nil
}

// FdPath is the /proc/self/fd path of an open file: handed to mount(2) or open_tree(2), it
// names exactly the file the descriptor was opened on, whatever has been renamed or
// replaced by a link since. It needs /proc mounted.
func FdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// procFd returns N of a FdPath, and whether p is one.
func procFd(p string) (int, bool) {
	s, ok := strings.CutPrefix(p, "/proc/self/fd/")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}
