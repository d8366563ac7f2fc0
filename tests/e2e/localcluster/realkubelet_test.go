package localcluster

import (
	"context"
	"io"
	"strings"
	"testing"
)

// The real kubelet's module requires the same Kubernetes with the same staging pins as the
// version's hollow-kubelet module and lists only the kubelet as a tool; the hollow module's
// go.mod stays as it was (a change would re-tidy it and rebuild every cached hollow kubelet).
func TestRealKubeletGoMod(t *testing.T) {
	staging := []string{"k8s.io/api", "k8s.io/client-go"}
	hollow := kubeGoMod("v1.34.4", staging)
	if !strings.HasSuffix(hollow, "tool (\n\tk8s.io/kubernetes/cmd/kube-apiserver\n\tk8s.io/kubernetes/cmd/kube-controller-manager\n\tk8s.io/kubernetes/cmd/kube-scheduler\n)\n") {
		t.Errorf("the hollow module's go.mod changed:\n%s", hollow)
	}
	kubelet := kubeGoModTools("v1.34.4", staging, []string{kubeletComponent().pkg})
	head := func(s string) string { h, _, _ := strings.Cut(s, "tool ("); return h }
	if head(kubelet) != head(hollow) {
		t.Errorf("the kubelet's module pins otherwise than the hollow one's:\n%s\n---\n%s", kubelet, hollow)
	}
	if !strings.HasSuffix(kubelet, "tool (\n\tk8s.io/kubernetes/cmd/kubelet\n)\n") {
		t.Errorf("kubelet go.mod:\n%s", kubelet)
	}
}

// A version outside the supported minors is refused before anything is downloaded or built.
func TestBuildRealKubeletRefuses(t *testing.T) {
	t.Setenv("FAKECLOUD_E2E_CACHE", t.TempDir())
	for _, v := range []string{"v1.33.1", "v1.99.0", "1.34"} {
		if _, err := BuildVersion(context.Background(), VersionBuildOptions{Version: v, Components: []string{"kubelet"}, Out: io.Discard}); err == nil {
			t.Errorf("BuildVersion(%s, kubelet): want an error", v)
		}
	}
}
