package localcluster

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// The suite and the capacityplot command read what `up` wrote: the node
// plugins' URLs and sockets must survive the trip.
func TestInfoRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := Info{
		RunDir: dir, Kubeconfig: dir + "/kubeconfig-admin", CloudURL: "http://127.0.0.1:1", AdminToken: "t",
		Nodes:         []Node{{Name: "node-1", Zone: "zone-a", InstanceType: "e2e-medium", MaxAttachments: 8, OutOfBandSlots: 1}},
		PluginURLs:    map[string]string{"node-1": "http://127.0.0.1:2"},
		PluginSockets: map[string]string{"node-1": dir + "/n/node-1/csi/csi.sock"},
	}
	c := &Cluster{Info: want}
	if err := c.writeInfo(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadInfo = %+v, want %+v", got, want)
	}
}

func TestValidateStartNodes(t *testing.T) {
	for _, tc := range []struct {
		start int
		bad   bool
	}{{0, false}, {1, false}, {3, false}, {-1, true}, {4, true}} {
		o := DefaultOptions("/repo", t.TempDir(), "/tmp/x")
		o.StartNodes = tc.start
		err := o.Validate()
		// The binaries are missing: Validate always errs; only the StartNodes part is checked.
		if got := err != nil && strings.Contains(err.Error(), "(the nodes)"); got != tc.bad {
			t.Errorf("StartNodes %d of 3: Validate = %v; want a StartNodes error: %v", tc.start, err, tc.bad)
		}
	}
}

// Grow refuses a count it cannot reach before it starts anything.
func TestGrowBounds(t *testing.T) {
	o := DefaultOptions("/repo", "/bin", "/tmp/x")
	c := &Cluster{opts: o}
	c.Nodes = o.Nodes[:2]
	for _, n := range []int{1, 2, 4} {
		err := c.Grow(context.Background(), n)
		if err == nil || !strings.Contains(err.Error(), "want more than the 2 running and at most the 3") {
			t.Errorf("Grow(%d) from 2 of 3 = %v, want a bounds error", n, err)
		}
	}
}
