package localcluster

import (
	"reflect"
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
