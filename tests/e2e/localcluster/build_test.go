package localcluster

import "testing"

func TestBinaryName(t *testing.T) {
	for _, tc := range []struct{ pkg, want string }{
		{"k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"},
		{"./cmd/hollow-kubelet", "hollow-kubelet"},
		{"go.etcd.io/etcd/server/v3", "server"},
		{"github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer", "csi-resizer"},
		{"example.com/v2x", "v2x"},
		{"v3", "v3"},
	} {
		if got := binaryName(tc.pkg); got != tc.want {
			t.Errorf("binaryName(%q) = %q, want %q", tc.pkg, got, tc.want)
		}
	}
}

// The local cluster's set is a subset of the kind set, and every component
// has a distinct binary name, so that one `go build -o dir/` cannot write two
// of them to the same file.
func TestComponentSets(t *testing.T) {
	local, kind := selected(false), selected(true)
	if len(kind) != len(components()) || len(local) >= len(kind) {
		t.Fatalf("local %d, kind %d, all %d components: kind must be all, local fewer", len(local), len(kind), len(components()))
	}
	inKind := map[string]bool{}
	for _, c := range kind {
		inKind[c.name] = true
	}
	for _, c := range local {
		if !inKind[c.name] || c.kind {
			t.Errorf("local component %s: not in the kind set or marked kind-only", c.name)
		}
	}
	files := map[string]string{}
	for _, c := range components() {
		f := binaryName(c.pkg)
		if other, dup := files[f]; dup {
			t.Errorf("%s and %s both build %s", other, c.name, f)
		}
		files[f] = c.name
	}
	for _, name := range []string{"kubelet", "kubeadm", "kubectl", "kube-proxy"} {
		if !inKind[name] {
			t.Errorf("the kind set lacks %s", name)
		}
	}
}
