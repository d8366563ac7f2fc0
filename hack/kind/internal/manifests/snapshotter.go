package manifests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// Module paths of the external-snapshotter release: the CRDs are in the client module
// (config/crd), the snapshot-controller manifests in the main one
// (deploy/kubernetes/snapshot-controller).
const (
	snapshotterModule       = "github.com/kubernetes-csi/external-snapshotter/v8"
	snapshotterClientModule = "github.com/kubernetes-csi/external-snapshotter/client/v8"
)

// FetchSnapshotter copies the snapshot CRDs and the snapshot-controller manifests of
// external-snapshotter version (e.g. v8.6.0) into out/crd and out/snapshot-controller,
// replacing what is there. The files come from the Go module proxy through `go mod download`
// (the go command checks them against the checksum database), so no git or raw GitHub
// access is needed. goBin is the go command to run.
func FetchSnapshotter(ctx context.Context, goBin, version, out string) error {
	copies := []struct{ module, sub, dst string }{
		{snapshotterClientModule, "config/crd", "crd"},
		{snapshotterModule, "deploy/kubernetes/snapshot-controller", "snapshot-controller"},
	}
	for _, c := range copies {
		dir, err := moduleDir(ctx, goBin, c.module+"@"+version)
		if err != nil {
			return err
		}
		dst := filepath.Join(out, c.dst)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := copyTree(filepath.Join(dir, filepath.FromSlash(c.sub)), dst); err != nil {
			return fmt.Errorf("copy %s of %s@%s: %w", c.sub, c.module, version, err)
		}
	}
	return nil
}

func moduleDir(ctx context.Context, goBin, modVersion string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, "mod", "download", "-json", modVersion)
	// Outside any module, so the caller's go.mod neither matters nor changes.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res struct{ Dir, Error string }
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr == nil && res.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", modVersion, res.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s", modVersion, err, stderr.String())
	}
	if res.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory in %q", modVersion, stdout.String())
	}
	return res.Dir, nil
}

// copyTree copies the regular files under src to dst with mode 0644 (module cache files are
// read-only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
