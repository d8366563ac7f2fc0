package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

// The cached suite binary is keyed by the module's go.mod, go.sum and Go
// files: any change to one of them names another binary, other files do not.
func TestUpstreamBinaryName(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	name := func() string {
		t.Helper()
		n, err := UpstreamBinaryName(dir)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	write("go.mod", "module x\n")
	write("go.sum", "")
	write("a_test.go", "package x\n")
	first := name()
	if !strings.HasPrefix(first, "e2e-storage-"+KubeVersion+"-") || !strings.HasSuffix(first, ".test") {
		t.Fatalf("name %q: want e2e-storage-%s-<hash>.test", first, KubeVersion)
	}
	write("testdriver.yaml", "read at run time, not built in\n")
	if got := name(); got != first {
		t.Errorf("a YAML file changed the name: %q, was %q", got, first)
	}
	for _, f := range []string{"a_test.go", "go.sum", "go.mod"} {
		write(f, "changed "+f+"\n")
		got := name()
		if got == first {
			t.Errorf("changing %s kept the name %q", f, got)
		}
		first = got
	}
	write("b_test.go", "package x\n")
	if name() == first {
		t.Error("a new Go file kept the name")
	}
	if err := os.Remove(filepath.Join(dir, "go.sum")); err != nil {
		t.Fatal(err)
	}
	if _, err := UpstreamBinaryName(dir); err == nil {
		t.Error("no error without go.sum")
	}
}

// TestProgress: go build -v's package lines are counted, not printed; errors and the go
// command's messages pass through whole, even split across writes; steps are numbered.
func TestProgress(t *testing.T) {
	var out strings.Builder
	p := newProgress(&out, 3, time.Now())
	p.next("resolve")
	p.setTotal(2000)
	p.next("build")
	for _, chunk := range []string{"k8s.io/api/core/v1\nk8s.io/ap", "i/apps/v1\n# k8s.io/x\n./a.go:1:2: undefined: y\n",
		"go: downloading k8s.io/kubernetes v1.37.2\nk8s.io/kubernetes/cmd/kube-apiserver\nlast line"} {
		if n, err := p.Write([]byte(chunk)); err != nil || n != len(chunk) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	p.flush()
	got := out.String()
	for _, w := range []string{"step 1/3: resolve (", "step 2/3: build (", "# k8s.io/x\n./a.go:1:2: undefined: y\n",
		"go: downloading k8s.io/kubernetes v1.37.2\n", "last line\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "k8s.io/api/core/v1") || strings.Contains(got, "apps/v1") {
		t.Errorf("package lines printed:\n%s", got)
	}
	if l := p.line(); !strings.Contains(l, "step 2/3 (build)") || !strings.Contains(l, ": 3 packages compiled of at most 2000") {
		t.Errorf("progress line %q", l)
	}
}

// A cached binary of the tools module's own package is current only while its stamp matches
// the package's sources and go.mod/go.sum; an upstream package's binary always is.
func TestOwnSourcesStamp(t *testing.T) {
	tools, bin := t.TempDir(), t.TempDir()
	for path, content := range map[string]string{"go.mod": "module x\n", "go.sum": "", "cmd/hk/main.go": "package main\n"} {
		p := filepath.Join(tools, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	own := component{name: "hk", pkg: "./cmd/hk"}
	upstream := component{name: "kube-apiserver", pkg: "k8s.io/kubernetes/cmd/kube-apiserver"}
	if !ownSourcesCurrent(tools, bin, upstream) {
		t.Error("an upstream binary is never stale by our sources")
	}
	if ownSourcesCurrent(tools, bin, own) {
		t.Error("a binary without a stamp counts as current")
	}
	if err := writeSourcesStamp(tools, bin, own); err != nil {
		t.Fatal(err)
	}
	if !ownSourcesCurrent(tools, bin, own) {
		t.Error("a binary just stamped is not current")
	}
	if err := os.WriteFile(filepath.Join(tools, "cmd/hk/main.go"), []byte("package main\n// changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ownSourcesCurrent(tools, bin, own) {
		t.Error("a changed main.go left the binary current")
	}
	if err := writeSourcesStamp(tools, bin, own); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "go.sum"), []byte("x v1 h1:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ownSourcesCurrent(tools, bin, own) {
		t.Error("a changed go.sum left the binary current")
	}
}
