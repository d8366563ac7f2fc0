package capacity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/internal/atomicfile"
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

// saveState writes s to path atomically (atomicfile.WriteFile: temporary file, fsync,
// rename, directory fsync), so a crash leaves either the old or the new state, never a torn
// one.
func saveState(path string, s PersistedState) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode capacity state: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o640); err != nil {
		return fmt.Errorf("save capacity state: %w", err)
	}
	return nil
}
