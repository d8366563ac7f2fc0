package nodestate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// MountPointer tells whether a path is a mount point; mount.Mounter satisfies it.
type MountPointer interface {
	MountPoint(path string) (*mount.MountPoint, error)
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
	// staged maps the ID of each volume staged here to its staged mount point; nil until
	// loaded from the markers.
	staged map[string]string
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
	mp, ok = s.staged[id]
	return mp, ok, nil
}

// Owner returns the volume staged at mount point mp on this node; ok is false when none is.
func (s *Staged) Owner(mp string) (id string, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return "", false, err
	}
	for v, at := range s.staged {
		if at == mp {
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
	staged := map[string]string{}
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
		mp, err := s.mounts.MountPoint(string(b))
		if err != nil {
			return fmt.Errorf("count staged volumes: inspect %s: %w", b, err)
		}
		if mp == nil {
			// Unstaged by a crash or a reboot after the marker was written: not staged.
			_ = os.Remove(s.dir.StagedMarker(id))
			continue
		}
		staged[id] = string(b)
	}
	s.staged = staged
	return nil
}

// Set records that volume id is staged at mount point mp (or no longer, mp == ""). A marker
// that cannot be written or removed is logged, not returned: the mount is what counts, and a
// count that errs low only holds new pods back while the cloud is unreadable.
func (s *Staged) Set(ctx context.Context, id, mp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.dir.StagedMarker(id)
	var err error
	if mp != "" {
		// The state folder is this node's even when the data lives in a shared data dir.
		err = s.dir.WriteAtomic(path, []byte(mp))
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
		s.staged[id] = mp
	} else {
		delete(s.staged, id)
	}
}
