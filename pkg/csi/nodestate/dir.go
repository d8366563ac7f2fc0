package nodestate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/internal/atomicfile"
)

// File and folder names inside the state directory (see the package doc).
const (
	lockFile     = ".lock"
	identityFile = "node.json"
	capacityFile = "capacity.json"
	volumesDir   = "volumes"
	stagedMarker = "staged"
	publishedDir = "published"
	dirPerm      = 0o750
	filePerm     = 0o640
)

// Dir is the state directory of one node plugin: every path in it comes from here. The zero
// Dir (and NewDir("")) is a node without state: its file paths are "" and nothing persists,
// except VolumeDir, which is then relative (the data of a test node without a state dir).
// Dir does no I/O until a method that writes or locks is called.
type Dir struct{ root string }

// NewDir returns the state directory rooted at root (--state-dir); it touches nothing.
func NewDir(root string) Dir { return Dir{root: root} }

// Root is the directory itself, "" for a node without state.
func (d Dir) Root() string { return d.root }

// Enabled reports whether the node keeps state at all.
func (d Dir) Enabled() bool { return d.root != "" }

// file is <root>/name, or "" without a root.
func (d Dir) file(name string) string {
	if d.root == "" {
		return ""
	}
	return filepath.Join(d.root, name)
}

// IdentityFile is <root>/node.json, the persisted node identity ("" without state).
func (d Dir) IdentityFile() string { return d.file(identityFile) }

// CapacityStateFile is <root>/capacity.json, the capacity reporter's state ("" without
// state).
func (d Dir) CapacityStateFile() string { return d.file(capacityFile) }

// LockFile is <root>/.lock ("" without state).
func (d Dir) LockFile() string { return d.file(lockFile) }

// VolumesDir is <root>/volumes, the parent of every volume's state folder.
func (d Dir) VolumesDir() string { return filepath.Join(d.root, volumesDir) }

// VolumeDir is <root>/volumes/<id>, the state folder of one volume (and its data, unless
// --volume-data-dir is set).
func (d Dir) VolumeDir(id string) string { return filepath.Join(d.VolumesDir(), id) }

// StagedMarker is <root>/volumes/<id>/staged, which names the mount point that makes the
// volume staged here.
func (d Dir) StagedMarker(id string) string { return filepath.Join(d.VolumeDir(id), stagedMarker) }

// PublishRecord is <root>/volumes/<id>/published/<hex SHA-256 of target>, the record of one
// publish of the volume at target ("" without state). Hashing keeps any target_path (up to
// the CSI limits) one bounded, safe file name.
func (d Dir) PublishRecord(id, target string) string {
	if d.root == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(target))
	return filepath.Join(d.VolumeDir(id), publishedDir, hex.EncodeToString(sum[:]))
}

// WriteAtomic writes data to path, a path of this Dir, so that a reader sees the old content
// or the new, never a part (temporary file, fsync, rename); missing parents are created
// 0750, the file is 0640.
func (d Dir) WriteAtomic(path string, data []byte) error {
	return atomicfile.WriteFile(path, data, filePerm)
}

// Lock takes an exclusive, non-blocking flock on <root>/.lock (creating root and the file if
// missing) and writes this process's pid into the file, so that two plugins never share (and
// overwrite) one state directory. The lock lives as long as the returned file stays open; the
// kernel drops it when the process dies, so a crash leaves no stale lock. flock locks belong
// to the open file description: a second open of the file, also in this process, conflicts.
// Errors: root or the file cannot be created or opened; the lock is held by another open file
// description ("state dir ... is in use by another driver process (pid N)", the pid when the
// file names one).
func (d Dir) Lock() (*os.File, error) {
	if d.root == "" {
		return nil, errors.New("lock state dir: no state dir")
	}
	if err := os.MkdirAll(d.root, dirPerm); err != nil {
		return nil, fmt.Errorf("create state dir %s: %w", d.root, err)
	}
	path := d.LockFile()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("open state dir lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another driver process"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
					holder = fmt.Sprintf("another driver process (pid %d)", pid)
				}
			}
			return nil, fmt.Errorf("state dir %s is in use by %s: lock %s is held; give each node plugin its own --state-dir", d.root, holder, path)
		}
		return nil, fmt.Errorf("lock state dir %s: %w", path, err)
	}
	// The pid only helps the error message of a second process; failing to write it is harmless.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
