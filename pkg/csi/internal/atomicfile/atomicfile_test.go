package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name    string
		old     string // "" means no file before
		data    string
		missing bool // the directory does not exist yet
	}{
		{name: "new file", data: "one\n"},
		{name: "replaces", old: "a much longer old content\n", data: "new\n"},
		{name: "creates the directory", data: "x", missing: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.missing {
				dir = filepath.Join(dir, "sub")
			}
			path := filepath.Join(dir, "state.json")
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, []byte(tc.data), 0o640); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != tc.data {
				t.Fatalf("content %q, %v; want %q", b, err, tc.data)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, %v; want 0640", fi.Mode(), err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("%d files in %s, want only the target (no temporary left)", len(entries), dir)
			}
		})
	}
}

func TestWriteFileFailureKeepsTheOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory in place of the target makes the rename fail after the temporary is written.
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "child"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(target, []byte("new"), 0o640); err == nil {
		t.Fatal("WriteFile over a non-empty directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d entries in %s, want 2 (no temporary left)", len(entries), dir)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("unrelated file changed to %q", b)
	}
}
