// Package manifests renders the kustomizations under deploy/ (deploy/base and its overlays
// deploy/kind and deploy/kind-offline; kustomize API, no kubectl), applies them to a cluster
// with server-side apply (optionally as a server-side dry run), waits for their workloads to
// roll out, and fetches the external-snapshotter release whose CRDs and snapshot-controller
// deploy/base/snapshot installs.
package manifests

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Render builds the kustomization in dir and returns its objects in kustomize's output order.
// Errors: no kustomization, a resource that does not parse, a kustomize error.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		// Through JSON, so numbers are int64/float64 as client-go expects (Map gives int).
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize %s: %s: %w", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("kustomize %s: %s: %w", dir, r.CurId(), err)
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// RenderYAML is Render's output as one multi-document YAML stream.
func RenderYAML(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return rm.AsYaml()
}

// ID is "Kind namespace/name" (or "Kind name" for cluster-scoped objects), for messages.
func ID(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

// Images lists the container and init-container images of every pod template in objs,
// keyed by "ID/container".
func Images(objs []*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			for _, c := range cs {
				m, ok := c.(map[string]any)
				if !ok {
					continue
				}
				name, _ := m["name"].(string)
				image, _ := m["image"].(string)
				out[ID(o)+"/"+name] = image
			}
		}
	}
	return out
}

// ImageTag returns the tag of the first image in objs whose repository (the reference
// without tag or digest) ends with "/"+repo, e.g. repo "csi-snapshotter".
func ImageTag(objs []*unstructured.Unstructured, repo string) (string, error) {
	for _, image := range Images(objs) {
		ref, _, _ := strings.Cut(image, "@")
		i := strings.LastIndex(ref, ":")
		if i < 0 || strings.Contains(ref[i:], "/") {
			continue
		}
		if strings.HasSuffix(ref[:i], "/"+repo) {
			return ref[i+1:], nil
		}
	}
	return "", fmt.Errorf("no image of repository %s", repo)
}
