package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The compatibility matrix (docs/compatibility.md) runs the local cluster with components of
// other versions than the pinned set. Each other version gets a tools module generated into
// the binary cache from a template: a go.mod that requires k8s.io/kubernetes (or the
// external-attacher) at that version, with the staging replaces Kubernetes' own go.mod lists,
// plus the hollow kubelet's sources copied from the clone's tools module. go mod tidy writes
// its go.sum once (checked against sum.golang.org like any download); Build then builds it as
// it builds the pinned module. Generated rather than committed: a committed module per version
// would add a 400-line go.sum per version to the clone for binaries most runs never build,
// and the template cannot drift from the pinned module's hollow kubelet because it copies it.

// kubeVersionRE is a Kubernetes release on the module proxy: v1.MINOR.PATCH.
var kubeVersionRE = regexp.MustCompile(`^v1\.([0-9]{2})\.([0-9]{1,3})$`)

// attacherVersionRE is an external-attacher/v4 release: v4.MINOR.PATCH.
var attacherVersionRE = regexp.MustCompile(`^v4\.([0-9]{1,3})\.([0-9]{1,3})$`)

// minKubeMinor is the oldest Kubernetes minor the generated modules support: the hollow
// kubelet's CRI client constructor (testdata/cri_v1.34.go) and the kubelet skew of a v1.37
// control plane.
const minKubeMinor = 34

// KubeMinor returns the minor of a Kubernetes version v1.MINOR.PATCH. Errors: another form,
// or a minor outside minKubeMinor..the pinned KubeVersion's.
func KubeMinor(v string) (int, error) {
	m := kubeVersionRE.FindStringSubmatch(v)
	if m == nil {
		return 0, fmt.Errorf("kubernetes version %q: want v1.MINOR.PATCH, e.g. %s", v, KubeVersion)
	}
	minor, _ := strconv.Atoi(m[1])
	pinned, _ := strconv.Atoi(kubeVersionRE.FindStringSubmatch(KubeVersion)[1])
	if minor < minKubeMinor || minor > pinned {
		return 0, fmt.Errorf("kubernetes version %s: minor %d outside %d..%d, the versions the hollow kubelet builds with", v, minor, minKubeMinor, pinned)
	}
	return minor, nil
}

// VersionCacheDir is the binary cache of Kubernetes version v: DefaultCacheDir for the pinned
// KubeVersion, else its sibling <...>/localcluster/<v>/bin (with FAKECLOUD_E2E_CACHE set:
// $FAKECLOUD_E2E_CACHE/versions/<v>/bin). The same layout holds an attacher version's
// binaries under csi-attacher-<v>.
func VersionCacheDir(v string) (string, error) {
	def, err := DefaultCacheDir()
	if err != nil || v == KubeVersion {
		return def, err
	}
	if !kubeVersionRE.MatchString(v) && !attacherVersionRE.MatchString(v) {
		return "", fmt.Errorf("version %q: want v1.MINOR.PATCH or v4.MINOR.PATCH", v)
	}
	name := v
	if attacherVersionRE.MatchString(v) {
		name = "csi-attacher-" + v
	}
	if os.Getenv("FAKECLOUD_E2E_CACHE") != "" {
		return filepath.Join(def, "versions", name, "bin"), nil
	}
	// def is .../localcluster/<KubeVersion>/bin.
	return filepath.Join(filepath.Dir(filepath.Dir(def)), name, "bin"), nil
}

// kubeComponents are the components a generated Kubernetes module builds: the control plane
// and the hollow kubelet (etcd and the sidecars come from the pinned module).
func kubeComponents() []component {
	var out []component
	for _, c := range components() {
		if !c.kind && (strings.HasPrefix(c.pkg, "k8s.io/kubernetes/") || c.name == "hollow-kubelet") {
			out = append(out, c)
		}
	}
	return out
}

// attacherComponent is the external-attacher of a generated attacher module.
func attacherComponent() component {
	for _, c := range components() {
		if c.name == "csi-attacher" {
			return c
		}
	}
	panic("no csi-attacher component")
}

// stagingModules reads the replace directives of k8s.io/kubernetes@v's go.mod (downloaded
// through the module proxy): the staging modules a consumer must pin to v0.MINOR.PATCH.
func stagingModules(ctx context.Context, dir, v string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+v)
	cmd.Dir = dir
	cmd.Env = append(buildEnv(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("download k8s.io/kubernetes@%s: %w\n%s", v, err, stderr.String())
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Error != "" {
		return nil, fmt.Errorf("download k8s.io/kubernetes@%s: %v %s", v, err, info.Error) //nolint:errorlint // err is nil when go mod download reported info.Error
	}
	gomod, err := os.ReadFile(info.GoMod)
	if err != nil {
		return nil, err
	}
	return parseStagingReplaces(gomod), nil
}

// parseStagingReplaces returns the sorted k8s.io module paths replaced by ./staging/ in a
// Kubernetes go.mod.
func parseStagingReplaces(gomod []byte) []string {
	var mods []string
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "./staging/") {
			mods = append(mods, f[0])
		}
	}
	sort.Strings(mods)
	return mods
}

// kubeGoMod is the go.mod of the generated module for Kubernetes v (minor.patch: the staging
// modules' v0.MINOR.PATCH).
func kubeGoMod(v string, staging []string) string {
	var tools []string
	for _, c := range kubeComponents() {
		if !strings.HasPrefix(c.pkg, "./") {
			tools = append(tools, c.pkg)
		}
	}
	return kubeGoModTools(v, staging, tools)
}

// kubeGoModTools is kubeGoMod with the tool packages tools.
func kubeGoModTools(v string, staging, tools []string) string {
	m := kubeVersionRE.FindStringSubmatch(v)
	var b strings.Builder
	fmt.Fprintf(&b, "// Generated by tests/e2e/localcluster (versions.go) for Kubernetes %s; do not edit.\n", v)
	b.WriteString("module github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster/tools\n\ngo 1.26.0\n\n")
	fmt.Fprintf(&b, "require k8s.io/kubernetes %s\n\nreplace (\n", v)
	for _, s := range staging {
		fmt.Fprintf(&b, "\t%s => %s v0.%s.%s\n", s, s, m[1], m[2])
	}
	b.WriteString(")\n\ntool (\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "\t%s\n", t)
	}
	b.WriteString(")\n")
	return b.String()
}

// attacherGoMod is the go.mod of the generated module for external-attacher v.
func attacherGoMod(v string) string {
	return fmt.Sprintf("// Generated by tests/e2e/localcluster (versions.go) for external-attacher %s; do not edit.\n"+
		"module github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster/tools\n\ngo 1.26.0\n\n"+
		"require github.com/kubernetes-csi/external-attacher/v4 %s\n\ntool %s\n", v, v, attacherComponent().pkg)
}

// criSource picks the hollow kubelet's cri.go for minor: the clone's own for the pinned minor,
// else testdata/cri_v1.<n>.go of the greatest n ≤ minor.
func criSource(hollowDir string, minor, pinned int) (string, error) {
	if minor >= pinned {
		return filepath.Join(hollowDir, "cri.go"), nil
	}
	for n := minor; n >= minKubeMinor; n-- {
		p := filepath.Join(hollowDir, "testdata", fmt.Sprintf("cri_v1.%d.go", n))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no hollow kubelet CRI file for v1.%d in %s/testdata", minor, hollowDir)
}

// writeIfChanged writes data to path unless it holds data already; it reports whether it
// wrote.
func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	return true, os.WriteFile(path, data, 0o644)
}

// GenerateModule writes the tools module of version v (Kubernetes v1.x.y or external-attacher
// v4.x.y) into moduleDir and runs go mod tidy when its go.mod template changed or it has no
// go.sum yet. toolsDir is the clone's pinned tools module (the hollow kubelet's sources).
// Errors: a version outside the supported forms, a download or tidy failure.
func GenerateModule(ctx context.Context, toolsDir, moduleDir, v string, out io.Writer) error {
	var gomod string
	switch {
	case kubeVersionRE.MatchString(v):
		minor, err := KubeMinor(v)
		if err != nil {
			return err
		}
		pinned, _ := KubeMinor(KubeVersion)
		hollow := filepath.Join(toolsDir, "cmd", "hollow-kubelet")
		cri, err := criSource(hollow, minor, pinned)
		if err != nil {
			return err
		}
		for src, dst := range map[string]string{filepath.Join(hollow, "main.go"): "main.go", cri: "cri.go"} {
			data, err := os.ReadFile(src)
			if err != nil {
				return fmt.Errorf("hollow kubelet sources: %w", err)
			}
			if _, err := writeIfChanged(filepath.Join(moduleDir, "cmd", "hollow-kubelet", dst), data); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(moduleDir, 0o755); err != nil {
			return err
		}
		staging, err := stagingModules(ctx, moduleDir, v)
		if err != nil {
			return err
		}
		gomod = kubeGoMod(v, staging)
	case attacherVersionRE.MatchString(v):
		gomod = attacherGoMod(v)
	default:
		return fmt.Errorf("version %q: want v1.MINOR.PATCH (Kubernetes) or v4.MINOR.PATCH (external-attacher)", v)
	}
	return tidyModule(ctx, moduleDir, v, gomod, out)
}

// tidyModule writes gomod as moduleDir's go.mod and runs go mod tidy when it differs from the
// last one tidied (go.mod.in) or there is no go.sum yet.
func tidyModule(ctx context.Context, moduleDir, v, gomod string, out io.Writer) error {
	changed, err := writeIfChanged(filepath.Join(moduleDir, "go.mod.in"), []byte(gomod))
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(moduleDir, "go.sum")); err == nil && !changed {
		return nil
	}
	if err := os.WriteFile(filepath.Join(moduleDir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "go mod tidy of the generated %s module in %s (downloads its modules the first time)\n", v, moduleDir)
	cmd := exec.CommandContext(ctx, "nice", "-n", "19", "go", "mod", "tidy")
	cmd.Dir = moduleDir
	cmd.Env = append(buildEnv(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		// A failed tidy must not leave a go.sum that skips it next time.
		_ = os.Remove(filepath.Join(moduleDir, "go.mod.in"))
		return fmt.Errorf("go mod tidy in %s: %w\n%s", moduleDir, err, stderr.String())
	}
	return nil
}

// VersionBuildOptions say which version to build and where.
type VersionBuildOptions struct {
	// ToolsDir is the clone's pinned tools module (tests/e2e/localcluster/tools).
	ToolsDir string
	// Version is a Kubernetes release (v1.x.y: the control plane and the hollow kubelet) or
	// an external-attacher release (v4.x.y: csi-attacher).
	Version string
	// Components, when set, are the names of the components to build (e.g. only
	// hollow-kubelet for a kubelet skew cell); default: all of the version's.
	Components []string
	// Force rebuilds binaries that exist.
	Force bool
	// Out receives progress.
	Out io.Writer
}

// BuildVersion builds version o.Version's components into VersionCacheDir(o.Version) and
// returns that folder: for KubeVersion the pinned module's (Build), else a generated module's
// (GenerateModule) beside it, <cache>/<version>/tools.
func BuildVersion(ctx context.Context, o VersionBuildOptions) (string, error) {
	binDir, err := VersionCacheDir(o.Version)
	if err != nil {
		return "", err
	}
	if o.Version == KubeVersion {
		return binDir, Build(ctx, BuildOptions{ToolsDir: o.ToolsDir, BinDir: binDir, Force: o.Force, Out: o.Out})
	}
	if kubeVersionRE.MatchString(o.Version) && slices.Contains(o.Components, "kubelet") {
		// The real kubelet, from a module of its own (realkubelet.go).
		if err := buildRealKubelet(ctx, o, binDir); err != nil {
			return "", err
		}
		if o.Components = slices.DeleteFunc(slices.Clone(o.Components), func(n string) bool { return n == "kubelet" }); len(o.Components) == 0 {
			return binDir, nil
		}
	}
	moduleDir := filepath.Join(filepath.Dir(binDir), "tools")
	if err := GenerateModule(ctx, o.ToolsDir, moduleDir, o.Version, o.Out); err != nil {
		return "", err
	}
	var cs []component
	version := KubeVersion
	if kubeVersionRE.MatchString(o.Version) {
		cs, version = kubeComponents(), o.Version
	} else {
		cs = []component{attacherComponent()}
	}
	if cs, err = pick(cs, o.Components); err != nil {
		return "", err
	}
	return binDir, Build(ctx, BuildOptions{ToolsDir: moduleDir, BinDir: binDir, Force: o.Force, Out: o.Out, only: cs, version: version})
}

// pick keeps the components of cs named in names (all of them when names is empty). Errors: a
// name that is not one of cs.
func pick(cs []component, names []string) ([]component, error) {
	if len(names) == 0 {
		return cs, nil
	}
	var out []component
	for _, n := range names {
		i := slices.IndexFunc(cs, func(c component) bool { return c.name == n })
		if i < 0 {
			var have []string
			for _, c := range cs {
				have = append(have, c.name)
			}
			return nil, fmt.Errorf("component %q: this version builds %s", n, strings.Join(have, ", "))
		}
		out = append(out, cs[i])
	}
	return out, nil
}

// ErrNoVersion is returned by BinaryFor when a version's binary is not built.
var ErrNoVersion = errors.New("not built: run `localcluster build --version=...`")

// BinaryFor is the path of component name built at version v ("" = the pinned set in
// pinnedBinDir). Errors wrap ErrNoVersion when it is not there.
func BinaryFor(pinnedBinDir, v, name string) (string, error) {
	dir := pinnedBinDir
	if v != "" && v != KubeVersion {
		var err error
		if dir, err = VersionCacheDir(v); err != nil {
			return "", err
		}
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s %s in %s: %w", name, v, dir, ErrNoVersion)
	}
	return p, nil
}
