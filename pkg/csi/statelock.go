package csi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// stateLockFile is the file in --state-dir a node plugin holds an exclusive flock(2) on while
// it runs, so that two plugins never share (and overwrite) one state directory.
const stateLockFile = ".lock"

// lockStateDir takes an exclusive, non-blocking flock on <dir>/.lock (creating dir and the
// file if missing) and writes this process's pid into the file. The lock lives as long as the
// returned file stays open; the kernel drops it when the process dies, so a crash leaves no
// stale lock. flock locks belong to the open file description: a second open of the file,
// also in this process, conflicts. Errors: dir or the file cannot be created or opened; the
// lock is held by another open file description ("state dir ... is in use by another driver
// process (pid N)", the pid when the file names one).
func lockStateDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create state dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, stateLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
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
			return nil, fmt.Errorf("state dir %s is in use by %s: lock %s is held; give each node plugin its own --state-dir", dir, holder, path)
		}
		return nil, fmt.Errorf("lock state dir %s: %w", path, err)
	}
	// The pid only helps the error message of a second process; failing to write it is harmless.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
