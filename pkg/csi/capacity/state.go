package capacity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// loadState reads the persisted state at path. A missing file is (zero, false, nil).
func loadState(path string) (PersistedState, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return PersistedState{}, false, nil
	}
	if err != nil {
		return PersistedState{}, false, fmt.Errorf("read capacity state %s: %w", path, err)
	}
	var s PersistedState
	// Unknown fields are allowed so that a rolled-back plugin can read a newer file.
	if err := json.Unmarshal(b, &s); err != nil {
		return PersistedState{}, false, fmt.Errorf("parse capacity state %s: %w", path, err)
	}
	return s, true, nil
}

// saveState writes s to path atomically: a temporary file in the same directory is written
// and fsynced, renamed over path, and the directory is fsynced, so a crash leaves either the
// old or the new state, never a torn one.
func saveState(path string, s PersistedState) (err error) {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode capacity state: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create capacity state dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary capacity state in %s: %w", dir, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s to fsync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
