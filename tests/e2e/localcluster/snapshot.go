package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Module paths of the external-snapshotter release the tools module pins (and
// builds csi-snapshotter and snapshot-controller from): the CRDs are in the
// client module's config/crd, the snapshot-controller's RBAC in the main
// module's deploy/kubernetes/snapshot-controller, as deploy/base/snapshot
// takes them.
const (
	snapshotterModule       = "github.com/kubernetes-csi/external-snapshotter/v8"
	snapshotterClientModule = "github.com/kubernetes-csi/external-snapshotter/client/v8"
)

// SnapshotControllerNamespace is where the release's RBAC puts the
// snapshot-controller's ServiceAccount; the local cluster's snapshot-controller
// authenticates as it.
const SnapshotControllerNamespace = "kube-system"

// snapshotRelease is where the pinned release's files lie in the module cache.
type snapshotRelease struct {
	// CRDFiles are the CRD manifests config/crd/kustomization.yaml lists.
	CRDFiles []string
	// ControllerRBAC is rbac-snapshot-controller.yaml (ServiceAccount,
	// ClusterRole and binding, leader-election Role and binding).
	ControllerRBAC string
}

// findSnapshotRelease asks the go command in the tools module for the
// directories of the external-snapshotter modules it requires (in the module
// cache once `localcluster build` has run) and lists the files to apply.
func findSnapshotRelease(ctx context.Context, toolsDir string) (snapshotRelease, error) {
	var r snapshotRelease
	out, err := goList(ctx, toolsDir, "-m", "-f", "{{.Dir}}", snapshotterModule, snapshotterClientModule)
	if err != nil {
		return r, fmt.Errorf("locate the external-snapshotter release: %w", err)
	}
	dirs := strings.Fields(string(out))
	if len(dirs) != 2 {
		return r, fmt.Errorf("locate the external-snapshotter release in %s: want 2 module directories, go list printed %q (run `localcluster build` to download them)", toolsDir, out)
	}
	r.ControllerRBAC = filepath.Join(dirs[0], "deploy", "kubernetes", "snapshot-controller", "rbac-snapshot-controller.yaml")
	crdDir := filepath.Join(dirs[1], "config", "crd")
	data, err := os.ReadFile(filepath.Join(crdDir, "kustomization.yaml"))
	if err != nil {
		return r, fmt.Errorf("read the snapshot CRDs' kustomization: %w", err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return r, fmt.Errorf("parse %s/kustomization.yaml: %w", crdDir, err)
	}
	if len(k.Resources) == 0 {
		return r, fmt.Errorf("%s/kustomization.yaml lists no CRDs", crdDir)
	}
	for _, f := range k.Resources {
		r.CRDFiles = append(r.CRDFiles, filepath.Join(crdDir, filepath.FromSlash(f)))
	}
	return r, nil
}

// splitYAML returns the documents of a multi-document YAML file that hold
// an object (comment-only documents are dropped).
func splitYAML(data []byte) ([][]byte, error) {
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, err
		}
		if len(probe) > 0 {
			docs = append(docs, doc)
		}
	}
}

// applySnapshotSupport installs what the snapshottable suites need before
// csi-snapshotter and snapshot-controller start: the release's CRDs (waiting
// until each is Established), the snapshot-controller's RBAC and
// deploy/base/volumesnapshotclass.yaml. Objects that exist are left alone.
func applySnapshotSupport(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, r snapshotRelease, deployDir string) error {
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	vscGVR := schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
	var names []string
	for _, f := range r.CRDFiles {
		obj, err := readUnstructured(f)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD of %s: %w", f, err)
		}
		names = append(names, obj.GetName())
	}
	if err := poll(ctx, time.Minute, func() (bool, error) {
		for _, n := range names {
			crd, err := dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !established(crd) {
				return false, fmt.Errorf("CRD %s not Established yet", n)
			}
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("snapshot CRDs: %w", err)
	}
	data, err := os.ReadFile(r.ControllerRBAC)
	if err != nil {
		return fmt.Errorf("read %s: %w", r.ControllerRBAC, err)
	}
	// The API server creates kube-system itself, but perhaps a moment after /readyz.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SnapshotControllerNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", SnapshotControllerNamespace, err)
	}
	docs, err := splitYAML(data)
	if err != nil {
		return fmt.Errorf("split %s: %w", r.ControllerRBAC, err)
	}
	for i, doc := range docs {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("decode document %d of %s: %w", i+1, r.ControllerRBAC, err)
		}
		if err := create(ctx, cs, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create document %d of %s: %w", i+1, r.ControllerRBAC, err)
		}
	}
	vsc, err := readUnstructured(filepath.Join(deployDir, "volumesnapshotclass.yaml"))
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(vscGVR).Create(ctx, vsc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create VolumeSnapshotClass %s: %w", vsc.GetName(), err)
	}
	return nil
}

// readUnstructured reads a one-object YAML file.
func readUnstructured(path string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return obj, nil
}

// established reports whether a CRD's status has condition Established=True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
