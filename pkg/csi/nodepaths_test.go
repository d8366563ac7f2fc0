package csi

import (
	"os"
	"path/filepath"
)

// ensureFile creates an empty regular file (and its parents) if missing.
func ensureFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}
