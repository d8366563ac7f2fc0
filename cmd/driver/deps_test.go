package main

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryLinksNoClientset: the driver's binary links neither client-go's clientset
// (k8s.io/client-go/kubernetes, whose scheme registers every Kubernetes API group at start-up
// and which brings a typed client of each: 26.5 MB of the binary, 12 MB of its idle RSS; issue
// 28) nor any API types but the three groups the node plugin's cluster check reads and writes
// (clustercheck.NewClient, a kubeapi.Client). The twin of cmd/fakecloud's; it asks the go
// command for the packages this binary links (go list -deps, tests excluded).
func TestBinaryLinksNoClientset(t *testing.T) {
	// go test puts its own GOROOT/bin first in the test's PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH to list the binary's packages: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps .: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck") {
		t.Fatalf("go list -deps . lists no clustercheck package: not the driver's packages?\n%s", out)
	}
	allowedAPI := []string{"k8s.io/api/core/v1", "k8s.io/api/events/v1", "k8s.io/api/storage/v1"}
	var clientset, api []string
	for _, p := range deps {
		switch {
		case p == "k8s.io/client-go/kubernetes" || strings.HasPrefix(p, "k8s.io/client-go/kubernetes/"):
			clientset = append(clientset, p)
		case strings.HasPrefix(p, "k8s.io/api/") && !slices.Contains(allowedAPI, p):
			api = append(api, p)
		}
	}
	if len(clientset) > 0 {
		t.Errorf("the driver links client-go's clientset (%d packages, %s ...): it stays out (the cluster check uses internal/kubeapi)",
			len(clientset), clientset[0])
	}
	if len(api) > 0 {
		t.Errorf("the driver links %d more Kubernetes API packages (%s ...): it needs only %v (the cluster check's)", len(api), api[0], allowedAPI)
	}
}
