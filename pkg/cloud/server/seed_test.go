package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestBadFilesNameTheLine: an unknown field in a seed or tokens file is reported with its line.
func TestBadFilesNameTheLine(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.yaml")
	if err := os.WriteFile(seed, []byte("instances:\n  - id: n1\n    zone: zone-a\n    instanceTyp: small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - token: t\n    role: admin\n    rol: reader\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := server.LoadSeed(seed); err == nil || !strings.Contains(err.Error(), `"instanceTyp"`) || !strings.Contains(err.Error(), "(line 4)") {
		t.Errorf("LoadSeed: %v, want the unknown field and line 4", err)
	}
	if _, err := server.LoadTokens(tokens); err == nil || !strings.Contains(err.Error(), `"rol"`) || !strings.Contains(err.Error(), "(line 4)") {
		t.Errorf("LoadTokens: %v, want the unknown field and line 4", err)
	}
}
