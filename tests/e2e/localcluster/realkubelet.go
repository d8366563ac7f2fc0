package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// The real kubelet of another Kubernetes version, for a kind node (make e2e-matrix-kind,
// docs/compatibility.md): the compatibility matrix's oldest kubelet run as itself, beside the
// hollow kubelets of the local cluster. It is built from a generated module of its own,
// <cache>/<version>/kubelet-tools, not from the version's hollow-kubelet module: adding the
// kubelet's tool line there would change that module's go.sum, and with it the sources stamp
// of its hollow kubelet, which would then be rebuilt (many minutes on 2 cores) for nothing.
// The two modules require the same k8s.io/kubernetes, so the Go build cache shares nearly
// every package between them: after the hollow kubelet of a version, its kubelet takes a link.

// kubeletComponent is the real kubelet.
func kubeletComponent() component {
	for _, c := range components() {
		if c.name == "kubelet" {
			return c
		}
	}
	panic("no kubelet component")
}

// buildRealKubelet builds the kubelet of Kubernetes o.Version into binDir (cached: built once
// per version, unless o.Force), from the module kubelet-tools beside binDir.
func buildRealKubelet(ctx context.Context, o VersionBuildOptions, binDir string) error {
	if _, err := KubeMinor(o.Version); err != nil {
		return err
	}
	moduleDir := filepath.Join(filepath.Dir(binDir), "kubelet-tools")
	if err := os.MkdirAll(moduleDir, 0o755); err != nil {
		return err
	}
	staging, err := stagingModules(ctx, moduleDir, o.Version)
	if err != nil {
		return err
	}
	kubelet := kubeletComponent()
	gomod := kubeGoModTools(o.Version, staging, []string{kubelet.pkg})
	if err := tidyModule(ctx, moduleDir, o.Version, gomod, o.Out); err != nil {
		return fmt.Errorf("kubelet %s: %w", o.Version, err)
	}
	return Build(ctx, BuildOptions{ToolsDir: moduleDir, BinDir: binDir, Force: o.Force, Out: o.Out,
		only: []component{kubelet}, version: o.Version})
}
