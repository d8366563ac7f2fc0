package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// KubeVersion is the Kubernetes release the tools module pins; the binary
// cache is keyed by it.
const KubeVersion = "v1.37.2"

// component is one binary built from the tools module.
type component struct {
	name, pkg string
	// kube marks binaries that report k8s.io/component-base/version.
	kube bool
}

// components lists what the local cluster runs, in build order: the
// apiserver first because it is the longest and everything waits for it.
func components() []component {
	return []component{
		{name: "kube-apiserver", pkg: "k8s.io/kubernetes/cmd/kube-apiserver", kube: true},
		{name: "hollow-kubelet", pkg: "./cmd/hollow-kubelet", kube: true},
		{name: "kube-controller-manager", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", kube: true},
		{name: "kube-scheduler", pkg: "k8s.io/kubernetes/cmd/kube-scheduler", kube: true},
		{name: "etcd", pkg: "go.etcd.io/etcd/server/v3"},
		{name: "csi-attacher", pkg: "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"},
		{name: "csi-provisioner", pkg: "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"},
	}
}

// DefaultCacheDir is where built binaries live unless FAKECLOUD_E2E_CACHE says
// otherwise: ${XDG_CACHE_HOME:-$HOME/.cache}/fakecloud-csi/localcluster/<version>/bin,
// outside the clone so that a fresh CI clone reuses them.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("FAKECLOUD_E2E_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache dir: set FAKECLOUD_E2E_CACHE: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "fakecloud-csi", "localcluster", KubeVersion, "bin"), nil
}

// ldflags stamps the Kubernetes version so that skew checks and kubectl see
// KubeVersion instead of v0.0.0-master. It must stay byte-identical between
// runs, or the Go build cache misses.
func ldflags(c component) string {
	const v = "k8s.io/component-base/version"
	flags := []string{"-s", "-w",
		"-X", v + ".gitVersion=" + KubeVersion,
		"-X", v + ".gitMajor=1",
		"-X", v + ".gitMinor=37",
		"-X", v + ".gitTreeState=clean",
		"-X", v + ".gitCommit=0000000000000000000000000000000000000000",
		"-X", v + ".buildDate=2026-01-01T00:00:00Z",
	}
	if strings.HasPrefix(c.name, "csi-") {
		flags = append(flags, "-X", "main.version=v-e2e")
	}
	return strings.Join(flags, " ")
}

// BuildOptions say where the tools module is and where binaries go.
type BuildOptions struct {
	// ToolsDir is tests/e2e/localcluster/tools of the clone.
	ToolsDir string
	// BinDir is the binary cache (DefaultCacheDir).
	BinDir string
	// Force rebuilds binaries that exist.
	Force bool
	// Out receives one line per step with its duration.
	Out io.Writer
}

// Build builds every missing component binary into BinDir with `nice -n 10`
// (other work shares the CPU) and reports each step with its duration.
func Build(ctx context.Context, o BuildOptions) error {
	if err := os.MkdirAll(o.BinDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.BinDir, err)
	}
	start := time.Now()
	for _, c := range components() {
		dst := filepath.Join(o.BinDir, c.name)
		if _, err := os.Stat(dst); err == nil && !o.Force {
			fmt.Fprintf(o.Out, "%-24s cached %s\n", c.name, dst)
			continue
		}
		t := time.Now()
		fmt.Fprintf(o.Out, "%-24s building %s\n", c.name, c.pkg)
		tmp := dst + ".tmp"
		args := []string{"-n", "10", "go", "build", "-trimpath", "-o", tmp, "-ldflags", ldflags(c), c.pkg}
		cmd := exec.CommandContext(ctx, "nice", args...)
		cmd.Dir = o.ToolsDir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = o.Out, io.MultiWriter(o.Out, &stderr)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build %s (%s) in %s: %w", c.name, c.pkg, o.ToolsDir, err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			return fmt.Errorf("install %s: %w", c.name, err)
		}
		fmt.Fprintf(o.Out, "%-24s built in %s\n", c.name, time.Since(t).Round(time.Second))
	}
	fmt.Fprintf(o.Out, "all components ready in %s (%s)\n", time.Since(start).Round(time.Second), o.BinDir)
	return nil
}

// missingBinaries lists the components not in binDir.
func missingBinaries(binDir string) []string {
	var missing []string
	for _, c := range components() {
		if _, err := os.Stat(filepath.Join(binDir, c.name)); err != nil {
			missing = append(missing, c.name)
		}
	}
	return missing
}

// buildRepoBinaries builds cmd/fakecloud and cmd/driver of the clone at
// repoRoot into dir; the Go build cache makes this quick after the first run.
func buildRepoBinaries(ctx context.Context, repoRoot, dir string, out io.Writer) error {
	for _, name := range []string{"fakecloud", "driver"} {
		t := time.Now()
		if err := goBuild(ctx, repoRoot, filepath.Join(dir, name), "./cmd/"+name, ""); err != nil {
			return err
		}
		fmt.Fprintf(out, "%-24s built in %s\n", name, time.Since(t).Round(time.Millisecond))
	}
	return nil
}

// goBuild builds package pkg of the module at repoRoot into dst with
// ldflags (may be empty). -buildvcs=auto overrides a GOFLAGS=-buildvcs=false
// of the machine, so that an unstamped build still reports git's commit
// (pkg/version.Get) and /metrics tells the builds of an upgrade apart.
func goBuild(ctx context.Context, repoRoot, dst, pkg, ldflags string) error {
	args := []string{"build", "-buildvcs=auto", "-o", dst}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s in %s: %w\n%s", pkg, repoRoot, err, stderr.String())
	}
	return nil
}

// FindRepoRoot walks up from dir to the directory whose go.mod declares the
// main module github.com/fakecloud/fakecloud-csi.
func FindRepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module github.com/fakecloud/fakecloud-csi\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the fakecloud-csi clone (no go.mod of github.com/fakecloud/fakecloud-csi above)")
		}
		dir = parent
	}
}
