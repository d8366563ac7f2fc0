package csi

import (
	"context"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/nodestate"
)

// TestNodeCloudWaitNamesTheTokenFlag: a node plugin the cloud refuses (401: started without
// --cloud-token-file) says so and names the flag in its start-up wait for the node's zone, as
// the controller does (cloudWaitMessage; issue 26). Before, it logged only "Cannot learn the
// node's zone from the cloud yet", which sends the reader to the network.
func TestNodeCloudWaitNamesTheTokenFlag(t *testing.T) {
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 8, 1)
	f.FailNext(cloud.OperationGetInstance, cloud.NewError(cloud.CodeUnauthenticated, "no token"))
	topo := NewTopology("i-1", nodestate.NewDir(t.TempDir()), f, nil)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), 20*time.Second)
	defer cancel()
	topo.Fetch(ctx) // one refusal, then the zone
	if ctx.Err() != nil {
		t.Fatal("Fetch did not finish")
	}
	var msgs []string
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		if e.Err != nil {
			msgs = append(msgs, e.Message)
		}
	}
	want := "Cloud refused the node plugin: no --cloud-token-file was given; the node's zone cannot be learnt until it is"
	if len(msgs) != 1 || msgs[0] != want {
		t.Fatalf("error lines %q, want one: %q", msgs, want)
	}
}

// TestNodeCloudWaitMessage: the wait's line for each cause, from the status error Zone returns.
func TestNodeCloudWaitMessage(t *testing.T) {
	refused := cloudStatus(opDefault, cloud.NewError(cloud.CodeUnauthenticated, "unknown token"), "get instance %s", "i-1")
	down := cloudStatus(opDefault, cloud.NewError(cloud.CodeUnavailable, "down"), "get instance %s", "i-1")
	for _, tc := range []struct {
		name, tokenFile string
		err             error
		want            string
	}{
		{"no token", "", refused, "Cloud refused the node plugin: no --cloud-token-file was given; the node's zone cannot be learnt until it is"},
		{"a refused token", "/run/token", refused, "Cloud refused the token in --cloud-token-file; the node's zone cannot be learnt until it is accepted"},
		{"the cloud down", "/run/token", down, "Cannot learn the node's zone from the cloud yet"},
		{"the cloud down, no token", "", down, "Cannot learn the node's zone from the cloud yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeCloudWaitMessage(tc.err, tc.tokenFile); got != tc.want {
				t.Errorf("nodeCloudWaitMessage = %q, want %q", got, tc.want)
			}
		})
	}
}
