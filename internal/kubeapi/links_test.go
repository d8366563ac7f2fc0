package kubeapi_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinariesLinkNoClientset: neither shipped binary links client-go's clientset
// (k8s.io/client-go/kubernetes, whose scheme registers every Kubernetes API group at start-up
// and brings a typed client of each: 26-28 MB of each binary and 12-15 MB of its idle RSS;
// issues 25 and 28), nor any Kubernetes API types beyond the groups it reads and writes
// through this package. It asks the go command for the packages each binary links (go list
// -deps, tests excluded; well under a second once the test is built, so -short runs it too).
func TestBinariesLinkNoClientset(t *testing.T) {
	// go test puts its own GOROOT/bin first in the test's PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH to list the binaries' packages: %v", err)
	}
	const mod = "github.com/fakecloud/fakecloud-csi/"
	for _, tc := range []struct {
		binary string
		// marker is a package the binary must link (proof the listing is the right one);
		// user is where it talks to the API server, named in the failure.
		marker, user string
		allowedAPI   []string
	}{
		{"cmd/driver", "pkg/csi/clustercheck", "the cluster check (clustercheck.NewClient)",
			[]string{"k8s.io/api/core/v1", "k8s.io/api/events/v1", "k8s.io/api/storage/v1"}},
		{"cmd/fakecloud", "pkg/cloud/server/console", "the console's cluster view (console.KubeClient)",
			[]string{"k8s.io/api/core/v1", "k8s.io/api/storage/v1"}},
	} {
		t.Run(tc.binary, func(t *testing.T) {
			out, err := exec.Command(gobin, "list", "-deps", mod+tc.binary).Output()
			if err != nil {
				var stderr []byte
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
					stderr = ee.Stderr
				}
				t.Fatalf("go list -deps %s: %v\n%s", tc.binary, err, stderr)
			}
			deps := strings.Fields(string(out))
			if !slices.Contains(deps, mod+tc.marker) {
				t.Fatalf("go list -deps %s lists no %s: not that binary's packages?\n%s", tc.binary, tc.marker, out)
			}
			var clientset, api []string
			for _, p := range deps {
				switch {
				case p == "k8s.io/client-go/kubernetes" || strings.HasPrefix(p, "k8s.io/client-go/kubernetes/"):
					clientset = append(clientset, p)
				case strings.HasPrefix(p, "k8s.io/api/") && !slices.Contains(tc.allowedAPI, p):
					api = append(api, p)
				}
			}
			if len(clientset) > 0 {
				t.Errorf("%s links client-go's clientset (%d packages, %s ...): it stays out (%s uses internal/kubeapi)",
					tc.binary, len(clientset), clientset[0], tc.user)
			}
			if len(api) > 0 {
				t.Errorf("%s links %d more Kubernetes API packages (%s ...): it needs only %v (%s's)",
					tc.binary, len(api), api[0], tc.allowedAPI, tc.user)
			}
		})
	}
}
