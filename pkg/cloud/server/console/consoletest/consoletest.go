// Package consoletest gives tests of the console's cluster view a client of a fake Kubernetes
// API server (kubeapitest): the view's four LIST calls (CSINodes, VolumeAttachments, Pods and
// Events, every namespace's) reach it over HTTP through the console's own client
// (console.KubeClient), as they reach a real API server. A test sets the cluster up and
// changes it in the kubeapitest.Server, counts the view's calls in its Actions (each with the
// ListOptions the request carried), and turns a list into an API error with a reactor.
//
// Tests only.
package consoletest

import (
	"testing"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
)

// Client returns the console's client of the fake API server kube.
func Client(t testing.TB, kube *kubeapitest.Server) *console.KubeClient {
	t.Helper()
	c, err := console.NewKubeClient(kube.Config())
	if err != nil {
		t.Fatalf("console client of the test API server: %v", err)
	}
	return c
}
