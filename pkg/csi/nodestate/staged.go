package nodestate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// MountPointer tells whether a path is a mount point; mount.Mounter satisfies it.
type MountPointer interface {
	MountPoint(path string) (*mount.MountPoint, error)
}

// Stage is the record of one staged volume: where its staged mount is and of which access
// type it was staged. The node service acts on a staging path only as its stage record says:
// a block stage has its device bound on <staging>/block, and a mount stage's <staging>/block
// is a file of the pod's data that the node never touches.
type Stage struct {
	// Path is the staged mount point: the staging_target_path of a mount volume,
	// <staging_target_path>/block of a block volume. Empty: not staged.
	Path string `json:"path"`
	// Block is true when the volume was staged as a block volume (a loop device bound on
	// Path).
	Block bool `json:"block"`
}

// StagingPath is the staging_target_path of the stage: Path, or its folder for block.
func (s Stage) StagingPath() string {
	if s.Block {
		return filepath.Dir(s.Path)
	}
	return s.Path
}

// Staged tracks the volumes staged on this node: the node service records each stage and
// unstage (Set), and reads where a volume is staged (At); the capacity reporter reads the
// count (Count) as the live floor of its policy. The record of each volume is its staged
// marker in the state directory, so that the count is right after a restart: the mounts
// outlive the plugin. Safe for concurrent use.
type Staged struct {
	dir    Dir
	mounts MountPointer

	mu sync.Mutex
	// staged maps the ID of each volume staged here to its stage record; nil until loaded
	// from the markers.
	staged map[string]Stage
}

// NewStaged returns the tracker of the volumes staged under d, whose mounts m inspects. It
// does no I/O: the markers are read on first use.
func NewStaged(d Dir, m MountPointer) *Staged { return &Staged{dir: d, mounts: m} }

// Count returns how many volumes are staged on this node now, the node's own count of this
// driver's volumes in use here (capacity.AttachedHereFunc). The first call (of Count or At)
// reads the staged markers and keeps those whose mount still exists, so volumes staged before
// a restart count and ones whose mount went away (a reboot) do not; later calls are in
// memory. Errors: the state directory or a marker cannot be read (the count is then unknown).
func (s *Staged) Count() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return 0, err
	}
	return len(s.staged), nil
}

// At returns the mount point volume id is staged at on this node (the staging path, or
// <staging>/block for a block volume); ok is false when it is not staged here.
func (s *Staged) At(id string) (mp string, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return "", false, err
	}
	st, ok := s.staged[id]
	return st.Path, ok, nil
}

// Get returns the stage record of volume id; ok is false when it is not staged here.
func (s *Staged) Get(id string) (st Stage, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return Stage{}, false, err
	}
	st, ok = s.staged[id]
	return st, ok, nil
}

// Owner returns the volume staged at p on this node, p being either its staged mount point
// or its staging path (the folder of a block volume's); ok is false when none is.
func (s *Staged) Owner(p string) (id string, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return "", false, err
	}
	for v, at := range s.staged {
		if at.Path == p || at.StagingPath() == p {
			return v, true, nil
		}
	}
	return "", false, nil
}

func (s *Staged) loadLocked() error {
	if s.staged != nil {
		return nil
	}
	dir := s.dir.VolumesDir()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("count staged volumes in %s: %w", dir, err)
	}
	staged := map[string]Stage{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		id := e.Name()
		b, err := os.ReadFile(s.dir.StagedMarker(id))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("count staged volumes: %w", err)
		}
		st, legacy := parseMarker(b)
		mp, err := s.mounts.MountPoint(st.Path)
		if err != nil {
			return fmt.Errorf("count staged volumes: inspect %s: %w", st.Path, err)
		}
		if mp == nil {
			// Unstaged by a crash or a reboot after the marker was written: not staged.
			_ = os.Remove(s.dir.StagedMarker(id))
			continue
		}
		if legacy {
			// A marker of a driver before the access type was recorded: a block stage is a
			// device bound on <staging>/block; a mount stage binds a folder.
			st.Block = filepath.Base(st.Path) == "block" && mp.Device != ""
		}
		staged[id] = st
	}
	s.staged = staged
	return nil
}

// parseMarker reads a staged marker: a JSON Stage, or, written by a driver before the access
// type was recorded (legacy), the bare mount point path.
func parseMarker(b []byte) (st Stage, legacy bool) {
	if strings.HasPrefix(string(b), "{") {
		if err := json.Unmarshal(b, &st); err == nil && st.Path != "" {
			return st, false
		}
	}
	return Stage{Path: string(b)}, true
}

// Set records that volume id is staged as st (or no longer, st.Path == ""). A marker that
// cannot be written or removed is logged, not returned: the mount is what counts, and a
// count that errs low only holds new pods back while the cloud is unreadable.
func (s *Staged) Set(ctx context.Context, id string, st Stage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.dir.StagedMarker(id)
	mp := st.Path
	var err error
	if mp != "" {
		// The state folder is this node's even when the data lives in a shared data dir.
		var b []byte
		if b, err = json.Marshal(st); err == nil {
			err = s.dir.WriteAtomic(path, b)
		}
	} else if err = os.Remove(path); errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot update the staged marker", "volumeID", id)
	}
	if s.staged == nil {
		return // the markers are read on first use
	}
	if mp != "" {
		s.staged[id] = st
	} else {
		delete(s.staged, id)
	}
}
