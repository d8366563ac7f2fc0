package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestSplitYAML(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		kinds    []string
	}{
		{"one object", "kind: A\n", []string{"A"}},
		{"leading separator and comment-only document", "# header\n---\nkind: A\n---\n# nothing here\n---\nkind: B\n", []string{"A", "B"}},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := splitYAML([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, d := range docs {
				kinds = append(kinds, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(d)), "kind:")))
			}
			if !slices.Equal(kinds, tc.kinds) {
				t.Errorf("kinds %q, want %q", kinds, tc.kinds)
			}
		})
	}
	if _, err := splitYAML([]byte("kind: [\n")); err == nil {
		t.Error("no error for a malformed document")
	}
}

func TestEstablished(t *testing.T) {
	crd := func(conds ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": conds}}}
	}
	cond := func(typ, st string) any { return map[string]any{"type": typ, "status": st} }
	for _, tc := range []struct {
		name string
		crd  *unstructured.Unstructured
		want bool
	}{
		{"no status", &unstructured.Unstructured{Object: map[string]any{}}, false},
		{"names accepted only", crd(cond("NamesAccepted", "True")), false},
		{"established false", crd(cond("Established", "False")), false},
		{"established", crd(cond("NamesAccepted", "True"), cond("Established", "True")), true},
	} {
		if got := established(tc.crd); got != tc.want {
			t.Errorf("%s: established = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The local cluster applies the RBAC of every sidecar it runs, from the same
// files as deploy/base (and so kind).
func TestDeployFilesCoverTheSidecars(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "deploy", "base")
	files, err := deployFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"rbac-provisioner-clusterrole.yaml", "rbac-attacher-clusterrole.yaml",
		"resizer-clusterrole.yaml", "resizer-clusterrolebinding.yaml",
		"snapshotter-clusterrole.yaml", "snapshotter-clusterrolebinding.yaml",
		"rbac-sidecars-role.yaml", "csidriver.yaml", "storageclass.yaml", "volumeattributesclass.yaml",
	} {
		if !slices.Contains(files, filepath.Join(dir, want)) {
			t.Errorf("deployFiles lacks %s", want)
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("deployFiles lists %s: %v", f, err)
		}
	}
}

// The release files come from the module cache through the tools module's go.mod, so the CRDs
// match the csi-snapshotter and snapshot-controller built from it.
func TestFindSnapshotRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command (may download the external-snapshotter modules); skipped under -short")
	}
	r, err := findSnapshotRelease(t.Context(), "tools")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range r.CRDFiles {
		names = append(names, filepath.Base(f))
		if !strings.Contains(f, "external-snapshotter/client/v8@v8.") {
			t.Errorf("CRD %s is not from the client module the tools module pins", f)
		}
	}
	for _, want := range []string{"snapshot.storage.k8s.io_volumesnapshotclasses.yaml", "snapshot.storage.k8s.io_volumesnapshotcontents.yaml", "snapshot.storage.k8s.io_volumesnapshots.yaml"} {
		if !slices.Contains(names, want) {
			t.Errorf("CRDs %v lack %s", names, want)
		}
	}
	data, err := os.ReadFile(r.ControllerRBAC)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := splitYAML(data)
	if err != nil || len(docs) < 4 {
		t.Errorf("snapshot-controller RBAC: %d documents (%v), want ServiceAccount, ClusterRole, bindings, Role", len(docs), err)
	}
	// Every document is a kind applySnapshotSupport can create, in the namespace the
	// snapshot-controller's client certificate names.
	cs := fake.NewClientset()
	for i, doc := range docs {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
		if err := create(t.Context(), cs, obj); err != nil {
			t.Errorf("document %d: %v", i+1, err)
		}
		if sa, ok := obj.(*corev1.ServiceAccount); ok && (sa.Namespace != SnapshotControllerNamespace || sa.Name != "snapshot-controller") {
			t.Errorf("ServiceAccount %s/%s, want %s/snapshot-controller", sa.Namespace, sa.Name, SnapshotControllerNamespace)
		}
	}
	for _, f := range append(r.CRDFiles, filepath.Join("..", "..", "..", "deploy", "base", "volumesnapshotclass.yaml")) {
		obj, err := readUnstructured(f)
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetName() == "" || obj.GetKind() == "" {
			t.Errorf("%s: kind %q name %q", f, obj.GetKind(), obj.GetName())
		}
	}
}
