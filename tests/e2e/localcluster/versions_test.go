package localcluster

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestKubeMinor(t *testing.T) {
	for _, tc := range []struct {
		v       string
		want    int
		wantErr string
	}{
		{v: "v1.34.4", want: 34},
		{v: KubeVersion, want: 37},
		{v: "v1.33.9", wantErr: "outside 34..37"},
		{v: "v1.38.0", wantErr: "outside 34..37"},
		{v: "1.34.4", wantErr: "want v1.MINOR.PATCH"},
		{v: "v1.34.4-rc.1", wantErr: "want v1.MINOR.PATCH"},
		{v: "v1.34.4/../../x", wantErr: "want v1.MINOR.PATCH"},
	} {
		got, err := KubeMinor(tc.v)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("KubeMinor(%q) = %d, %v; want an error with %q", tc.v, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("KubeMinor(%q) = %d, %v; want %d", tc.v, got, err, tc.want)
		}
	}
}

func TestVersionCacheDir(t *testing.T) {
	t.Setenv("FAKECLOUD_E2E_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/c")
	for _, tc := range []struct{ v, want, wantErr string }{
		{v: KubeVersion, want: "/c/fakecloud-csi/localcluster/" + KubeVersion + "/bin"},
		{v: "v1.34.4", want: "/c/fakecloud-csi/localcluster/v1.34.4/bin"},
		{v: "v4.12.0", want: "/c/fakecloud-csi/localcluster/csi-attacher-v4.12.0/bin"},
		{v: "../../etc", wantErr: "want v1.MINOR.PATCH or v4.MINOR.PATCH"},
	} {
		got, err := VersionCacheDir(tc.v)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("VersionCacheDir(%q) = %q, %v; want an error with %q", tc.v, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("VersionCacheDir(%q) = %q, %v; want %q", tc.v, got, err, tc.want)
		}
	}
	t.Setenv("FAKECLOUD_E2E_CACHE", "/ci")
	if got, _ := VersionCacheDir("v1.34.4"); got != "/ci/versions/v1.34.4/bin" {
		t.Errorf("with FAKECLOUD_E2E_CACHE: %q", got)
	}
}

// The generated go.mod pins every staging module of Kubernetes' own go.mod to v0.MINOR.PATCH
// and names the control plane as tools; the hollow kubelet is the module's own package.
func TestKubeGoMod(t *testing.T) {
	staging := parseStagingReplaces([]byte("module k8s.io/kubernetes\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n" +
		"\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n"))
	if want := []string{"k8s.io/api", "k8s.io/client-go"}; !reflect.DeepEqual(staging, want) {
		t.Fatalf("staging = %v, want %v", staging, want)
	}
	gomod := kubeGoMod("v1.34.4", staging)
	for _, want := range []string{
		"require k8s.io/kubernetes v1.34.4\n", "\tk8s.io/api => k8s.io/api v0.34.4\n", "\tk8s.io/client-go => k8s.io/client-go v0.34.4\n",
		"\tk8s.io/kubernetes/cmd/kube-apiserver\n", "\tk8s.io/kubernetes/cmd/kube-scheduler\n", "\tk8s.io/kubernetes/cmd/kube-controller-manager\n",
	} {
		if !strings.Contains(gomod, want) {
			t.Errorf("go.mod lacks %q:\n%s", want, gomod)
		}
	}
	for _, not := range []string{"kubelet\n", "github.com/x/y", "etcd", "csi-"} {
		if strings.Contains(gomod, "\t"+not) || strings.Contains(gomod, not+" =>") {
			t.Errorf("go.mod has %q:\n%s", not, gomod)
		}
	}
	if a := attacherGoMod("v4.12.0"); !strings.Contains(a, "require github.com/kubernetes-csi/external-attacher/v4 v4.12.0\n") ||
		!strings.Contains(a, "tool github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher\n") {
		t.Errorf("attacher go.mod:\n%s", a)
	}
}

// Each minor builds the hollow kubelet with the CRI constructor of its own client.
func TestCRISource(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"cri.go", "testdata/cri_v1.34.go", "testdata/cri_v1.36.go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for minor, want := range map[int]string{34: "testdata/cri_v1.34.go", 35: "testdata/cri_v1.34.go", 36: "testdata/cri_v1.36.go", 37: "cri.go"} {
		got, err := criSource(dir, minor, 37)
		if err != nil || got != filepath.Join(dir, want) {
			t.Errorf("criSource(%d) = %q, %v; want %s", minor, got, err, want)
		}
	}
	if _, err := criSource(dir, 33, 37); err == nil {
		t.Error("criSource(33): want an error")
	}
}

// The clone's testdata files are the ones criSource picks: each minor from minKubeMinor on
// has one.
func TestCRISourcesExist(t *testing.T) {
	hollow := filepath.Join("tools", "cmd", "hollow-kubelet")
	pinned, _ := KubeMinor(KubeVersion)
	for m := minKubeMinor; m <= pinned; m++ {
		if _, err := criSource(hollow, m, pinned); err != nil {
			t.Error(err)
		}
	}
}

func TestPick(t *testing.T) {
	cs := kubeComponents()
	got, err := pick(cs, []string{"hollow-kubelet"})
	if err != nil || len(got) != 1 || got[0].name != "hollow-kubelet" {
		t.Errorf("pick hollow-kubelet = %v, %v", got, err)
	}
	if _, err := pick(cs, []string{"etcd"}); err == nil || !strings.Contains(err.Error(), "this version builds") {
		t.Errorf("pick etcd: %v", err)
	}
	if all, _ := pick(cs, nil); len(all) != 4 {
		t.Errorf("kube components = %v, want the control plane and the hollow kubelet", all)
	}
}
