package localcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// KubeVersion is the Kubernetes release the tools module pins; the binary
// cache is keyed by it.
const KubeVersion = "v1.37.2"

// component is one binary built from the tools module.
type component struct {
	name, pkg string
	// kind marks binaries only the offline kind build needs (hack/kind/offline);
	// the local cluster runs the others.
	kind bool
	// versionFile, when set, is a file in the package's folder whose content is the
	// program's own version, stamped into its main.Version (agnhost's VERSION, as its
	// Makefile does); the image built from it is tagged with it.
	versionFile string
}

// components lists every binary of the tools module: what the local cluster runs,
// then what only the offline kind build adds (kubelet, kubeadm, kubectl and
// kube-proxy go into the node image, agnhost into the upstream e2e's test image;
// the sidecars run on both).
func components() []component {
	return []component{
		{name: "kube-apiserver", pkg: "k8s.io/kubernetes/cmd/kube-apiserver"},
		{name: "hollow-kubelet", pkg: "./cmd/hollow-kubelet"},
		{name: "kube-controller-manager", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager"},
		{name: "kube-scheduler", pkg: "k8s.io/kubernetes/cmd/kube-scheduler"},
		{name: "etcd", pkg: "go.etcd.io/etcd/server/v3"},
		{name: "csi-attacher", pkg: "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"},
		{name: "csi-provisioner", pkg: "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"},
		{name: "csi-resizer", pkg: "github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"},
		{name: "csi-snapshotter", pkg: "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"},
		{name: "snapshot-controller", pkg: "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"},
		{name: "kubelet", pkg: "k8s.io/kubernetes/cmd/kubelet", kind: true},
		{name: "kubeadm", pkg: "k8s.io/kubernetes/cmd/kubeadm", kind: true},
		{name: "kubectl", pkg: "k8s.io/kubernetes/cmd/kubectl", kind: true},
		{name: "kube-proxy", pkg: "k8s.io/kubernetes/cmd/kube-proxy", kind: true},
		// The upstream storage e2e's image for subPath (agnhost mounttest) and the Windows
		// default; hack/kind/offline/e2e-test-images.sh packs it.
		{name: "agnhost", pkg: "k8s.io/kubernetes/test/images/agnhost", kind: true, versionFile: "VERSION"},
	}
}

// selected returns the components a build of the given set needs: the local
// cluster's, plus the kind node image's when kind is true.
func selected(kind bool) []component {
	var out []component
	for _, c := range components() {
		if !c.kind || kind {
			out = append(out, c)
		}
	}
	return out
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

// kubeLDFlags stamps the Kubernetes version so that skew checks and kubectl see
// KubeVersion instead of v0.0.0-master. It must stay byte-identical between
// runs, or the Go build cache misses the link.
func kubeLDFlags() string { return kubeLDFlagsFor(KubeVersion) }

// kubeLDFlagsFor is kubeLDFlags for Kubernetes version version (v1.MINOR.PATCH), the
// components of a generated module of another version (versions.go).
func kubeLDFlagsFor(version string) string {
	const v = "k8s.io/component-base/version"
	minor := "37"
	if m := kubeVersionRE.FindStringSubmatch(version); m != nil {
		minor = m[1]
	}
	return strings.Join([]string{"-s", "-w",
		"-X", v + ".gitVersion=" + version,
		"-X", v + ".gitMajor=1",
		"-X", v + ".gitMinor=" + minor,
		"-X", v + ".gitTreeState=clean",
		"-X", v + ".gitCommit=0000000000000000000000000000000000000000",
		"-X", v + ".buildDate=2026-01-01T00:00:00Z",
	}, " ")
}

// buildEnv is the one environment every tools-module binary is built with, for
// the local cluster and the kind node image alike, so that both share the Go
// build cache: static (CGO off, as Kubernetes releases are), -mod=mod because the
// tool directives are resolved from go.mod alone.
func buildEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
}

// goList runs `go list ARGS...` in dir with the build's environment and returns its standard
// output; a failure carries go's standard error.
func goList(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	cmd.Env = buildEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w\n%s", dir, err, stderr.String())
	}
	return out, nil
}

// BuildOptions say where the tools module is and where binaries go.
type BuildOptions struct {
	// ToolsDir is tests/e2e/localcluster/tools of the clone.
	ToolsDir string
	// BinDir is the binary cache (DefaultCacheDir).
	BinDir string
	// Kind adds the binaries of the offline kind node image (kubelet, kubeadm,
	// kubectl, kube-proxy) to the local cluster's.
	Kind bool
	// Force rebuilds binaries that exist.
	Force bool
	// Out receives progress: what is built, a line at least every 30 s while
	// the Go build runs, and the duration.
	Out io.Writer
	// only, when set, are the components to build instead of selected(Kind), and
	// version the Kubernetes version stamped into them ("" = KubeVersion): a generated
	// module of another version (BuildVersion).
	only    []component
	version string
}

// Build builds every missing component binary into BinDir in one `nice -n 10 go
// build` (other work shares the CPU; one invocation lets the Go build schedule
// the shared packages of all of them at once), stamps the Kubernetes version
// into every binary and each sidecar's module version into its main.version.
func Build(ctx context.Context, o BuildOptions) error {
	if err := os.MkdirAll(o.BinDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.BinDir, err)
	}
	start := time.Now()
	todo := o.missing()
	if len(todo) == 0 {
		fmt.Fprintf(o.Out, "all components ready (%s)\n", o.BinDir)
		return nil
	}
	prog := newProgress(o.Out, 3, start)
	stop := prog.tick(progressPeriod)
	defer stop()
	prog.next("resolve the components' modules (go list; the first time downloads them from the module proxy)")
	versions, err := moduleVersions(ctx, o.ToolsDir, todo)
	if err != nil {
		return err
	}
	var pkgs, names []string
	for _, c := range todo {
		pkgs, names = append(pkgs, c.pkg), append(names, c.name)
	}
	if n, err := countDeps(ctx, o.ToolsDir, pkgs); err == nil {
		prog.setTotal(n)
	}
	tmp, err := os.MkdirTemp(o.BinDir, ".build-")
	if err != nil {
		return fmt.Errorf("temporary build dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	args, err := o.buildArgs(tmp, todo, versions)
	if err != nil {
		return err
	}
	prog.next(fmt.Sprintf("build %s (one go build; a cold cache takes about 10 min on 2 cores, more when other work shares them)", strings.Join(names, ", ")))
	cmd := exec.CommandContext(ctx, "nice", args...)
	cmd.Dir = o.ToolsDir
	cmd.Env = buildEnv()
	cmd.Stdout, cmd.Stderr = o.Out, prog
	err = cmd.Run()
	prog.flush()
	if err != nil {
		return fmt.Errorf("build %s in %s: %w", strings.Join(names, " "), o.ToolsDir, err)
	}
	prog.next("install into " + o.BinDir)
	if err := o.install(tmp, todo); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "all components ready in %s (%s)\n", time.Since(start).Round(time.Second), o.BinDir)
	return nil
}

// missing are the components of the build (selected(Kind), or only) that BinDir lacks, or
// holds from older sources, or all of them with Force; it says each cached one on Out.
func (o BuildOptions) missing() []component {
	want := selected(o.Kind)
	if o.only != nil {
		want = o.only
	}
	var todo []component
	for _, c := range want {
		dst := filepath.Join(o.BinDir, c.name)
		if _, err := os.Stat(dst); err == nil && !o.Force && ownSourcesCurrent(o.ToolsDir, o.BinDir, c) {
			fmt.Fprintf(o.Out, "%-24s cached %s\n", c.name, dst)
			continue
		}
		todo = append(todo, c)
	}
	return todo
}

// buildArgs are nice's arguments for the one go build of todo into dir: the Kubernetes
// version stamped into every binary, each sidecar's module version into its main.version,
// a versionFile's content into main.Version.
func (o BuildOptions) buildArgs(dir string, todo []component, versions map[string]pkgInfo) ([]string, error) {
	ld := kubeLDFlags()
	if o.version != "" {
		ld = kubeLDFlagsFor(o.version)
	}
	args := []string{"-n", "10", "go", "build", "-v", "-trimpath", "-o", dir + "/", "-ldflags", ld}
	for _, c := range todo {
		v := versions[c.pkg]
		switch {
		case strings.HasPrefix(c.name, "csi-") || c.name == "snapshot-controller":
			args = append(args, "-ldflags", c.pkg+"="+ld+" -X main.version="+v.module)
		case c.versionFile != "":
			own, err := os.ReadFile(filepath.Join(v.dir, c.versionFile))
			if err != nil {
				return nil, fmt.Errorf("version of %s: %w", c.name, err)
			}
			args = append(args, "-ldflags", c.pkg+"="+ld+" -X main.Version="+strings.TrimSpace(string(own)))
		}
	}
	for _, c := range todo {
		args = append(args, c.pkg)
	}
	return args, nil
}

// install moves the binaries of todo built into dir to BinDir and records their sources.
func (o BuildOptions) install(dir string, todo []component) error {
	for _, c := range todo {
		if err := os.Rename(filepath.Join(dir, binaryName(c.pkg)), filepath.Join(o.BinDir, c.name)); err != nil {
			return fmt.Errorf("install %s: %w", c.name, err)
		}
		if err := writeSourcesStamp(o.ToolsDir, o.BinDir, c); err != nil {
			return err
		}
	}
	return nil
}

// sourcesStamp is the file beside a binary of the tools module's own packages (./cmd/...)
// that holds the hash of the sources it was built from: the upstream packages are pinned by
// go.mod, but our own main (the hollow kubelet) changes with the clone, and a cached binary
// of older sources must not survive the change.
func sourcesStamp(binDir string, c component) string {
	return filepath.Join(binDir, "."+c.name+".sources")
}

// ownSourcesHash is the SHA-256 over the names and contents of go.mod, go.sum and the .go
// files of component c's package in toolsDir; "" for a package outside the tools module.
func ownSourcesHash(toolsDir string, c component) (string, error) {
	if !strings.HasPrefix(c.pkg, "./") {
		return "", nil
	}
	gofiles, err := filepath.Glob(filepath.Join(toolsDir, filepath.FromSlash(c.pkg), "*.go"))
	if err != nil {
		return "", err
	}
	files := append([]string{filepath.Join(toolsDir, "go.mod"), filepath.Join(toolsDir, "go.sum")}, gofiles...)
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("hash the sources of %s: %w", c.name, err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ownSourcesCurrent reports whether the cached binary of c was built from the tools module's
// current sources (always true for an upstream package).
func ownSourcesCurrent(toolsDir, binDir string, c component) bool {
	want, err := ownSourcesHash(toolsDir, c)
	if err != nil || want == "" {
		return err == nil
	}
	got, err := os.ReadFile(sourcesStamp(binDir, c))
	return err == nil && strings.TrimSpace(string(got)) == want
}

// writeSourcesStamp records the sources a freshly built binary of c came from.
func writeSourcesStamp(toolsDir, binDir string, c component) error {
	sum, err := ownSourcesHash(toolsDir, c)
	if err != nil || sum == "" {
		return err
	}
	if err := os.WriteFile(sourcesStamp(binDir, c), []byte(sum+"\n"), 0o644); err != nil {
		return fmt.Errorf("record the sources of %s: %w", c.name, err)
	}
	return nil
}

// binaryName is the file `go build -o dir/` writes for a main package: its last
// path element, skipping a major-version suffix (go.etcd.io/etcd/server/v3 -> server).
func binaryName(pkg string) string {
	parts := strings.Split(pkg, "/")
	last := parts[len(parts)-1]
	if len(parts) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		last = parts[len(parts)-2]
	}
	return last
}

// pkgInfo is what go list says of a component's package.
type pkgInfo struct {
	// module is the version of the package's module (empty for the tools module's own).
	module string
	// dir is the package's source folder (in the module cache).
	dir string
}

// moduleVersions asks go list for the module version and folder of each
// component's package.
func moduleVersions(ctx context.Context, toolsDir string, cs []component) (map[string]pkgInfo, error) {
	args := []string{"-f", "{{.ImportPath}}\t{{.Dir}}\t{{with .Module}}{{.Version}}{{end}}"}
	for _, c := range cs {
		args = append(args, c.pkg)
	}
	out, err := goList(ctx, toolsDir, args...)
	if err != nil {
		return nil, err
	}
	versions := map[string]pkgInfo{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 {
			versions[f[0]] = pkgInfo{module: f[2], dir: f[1]}
		}
	}
	// go list prints "./cmd/x" as its full import path; key by what we asked.
	for _, c := range cs {
		if strings.HasPrefix(c.pkg, "./") {
			versions[c.pkg] = pkgInfo{}
		}
	}
	return versions, nil
}

// countDeps is how many packages building pkgs in dir involves (go list -deps): the most a
// cold build compiles.
func countDeps(ctx context.Context, dir string, pkgs []string) (int, error) {
	out, err := goList(ctx, dir, append([]string{"-deps", "-f", "{{.ImportPath}}"}, pkgs...)...)
	if err != nil {
		return 0, fmt.Errorf("count the packages to build: %w", err)
	}
	return bytes.Count(out, []byte("\n")), nil
}

// missingBinaries lists the local cluster's components not in binDir.
func missingBinaries(binDir string) []string {
	var missing []string
	for _, c := range selected(false) {
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

// UpstreamBuildOptions say where the upstream storage e2e module is and
// where its test binary goes.
type UpstreamBuildOptions struct {
	// ModuleDir is tests/e2e/upstream of the clone.
	ModuleDir string
	// BinDir is the binary cache (DefaultCacheDir), shared with the
	// components.
	BinDir string
	// Force rebuilds a binary that exists.
	Force bool
	// Out receives progress, as for Build.
	Out io.Writer
}

// upstreamSources are the files of the upstream module whose content keys
// its cached test binary: a change to any of them is a new binary.
func upstreamSources(dir string) ([]string, error) {
	gofiles, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	files := append([]string{filepath.Join(dir, "go.mod"), filepath.Join(dir, "go.sum")}, gofiles...)
	sort.Strings(files)
	return files, nil
}

// UpstreamBinaryName is the cached test binary's file name for the module's
// current sources: e2e-storage-<KubeVersion>-<12 hex digits of SHA-256 over
// the names and contents of upstreamSources>.test.
func UpstreamBinaryName(moduleDir string) (string, error) {
	files, err := upstreamSources(moduleDir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("hash the upstream e2e module: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	return "e2e-storage-" + KubeVersion + "-" + hex.EncodeToString(h.Sum(nil))[:12] + ".test", nil
}

// BuildUpstream builds the upstream storage e2e suite (`go test -c` of
// ModuleDir) into BinDir unless the binary of the module's current sources is
// there, and returns its path. It uses the components' environment and flags
// (buildEnv, -trimpath, kubeLDFlags), so every package the components share
// with the suite comes from the Go build cache.
func BuildUpstream(ctx context.Context, o UpstreamBuildOptions) (string, error) {
	name, err := UpstreamBinaryName(o.ModuleDir)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(o.BinDir, name)
	if _, err := os.Stat(dst); err == nil && !o.Force {
		fmt.Fprintf(o.Out, "%-24s cached %s\n", "e2e-storage.test", dst)
		return dst, nil
	}
	if err := os.MkdirAll(o.BinDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", o.BinDir, err)
	}
	tmp, err := os.MkdirTemp(o.BinDir, ".build-")
	if err != nil {
		return "", fmt.Errorf("temporary build dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	// One step: go test -c has no -v that lists the packages it compiles, so the ticker
	// says the elapsed time only.
	prog := newProgress(o.Out, 1, start)
	stop := prog.tick(progressPeriod)
	defer stop()
	prog.next(fmt.Sprintf("build the %s storage e2e suite (go test -c; ~4 min once the components are built, 20-45 min cold)", KubeVersion))
	out := filepath.Join(tmp, "e2e-storage.test")
	// -vet=off: vetting the test package needs vet facts of all ~2,000
	// packages it imports, which the components' go build never computes
	// (over ten minutes on two cores), for code that is not ours.
	cmd := exec.CommandContext(ctx, "nice", "-n", "10", "go", "test", "-c", "-vet=off", "-trimpath", "-ldflags", kubeLDFlags(), "-o", out, ".")
	cmd.Dir = o.ModuleDir
	cmd.Env = buildEnv()
	cmd.Stdout, cmd.Stderr = o.Out, prog
	err = cmd.Run()
	prog.flush()
	if err != nil {
		return "", fmt.Errorf("go test -c in %s: %w", o.ModuleDir, err)
	}
	if err := os.Rename(out, dst); err != nil {
		return "", fmt.Errorf("install %s: %w", dst, err)
	}
	// Binaries of older sources (about 90 MB each) are never used again.
	old, _ := filepath.Glob(filepath.Join(o.BinDir, "e2e-storage-*.test"))
	for _, f := range old {
		if f != dst {
			_ = os.Remove(f)
		}
	}
	fmt.Fprintf(o.Out, "e2e-storage.test ready in %s (%s)\n", time.Since(start).Round(time.Second), dst)
	return dst, nil
}
