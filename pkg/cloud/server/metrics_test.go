package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestMetricsFollowTheStore checks the gauges read from the store at scrape time against
// the state the API changed, and the request counter by route and code.
func TestMetricsFollowTheStore(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "node-a"))
	limit := 2
	must[*cloud.Instance](t)(tc.admin.PatchInstance(ctx, "node-b", cloud.InstancePatch{AttachLimit: &limit}))
	if _, err := tc.driver.AttachVolume(ctx, v.ID, "node-b"); err == nil {
		t.Fatal("attach of a volume attached elsewhere succeeded")
	}
	metrics := string(tc.do(t, "GET", "/metrics", readerToken, "").body)
	for _, want := range []string{
		`fakecloud_instance_attachments{instance_id="node-a"} 1`,
		`fakecloud_instance_attachments{instance_id="node-b"} 0`,
		`fakecloud_instance_attach_limit{instance_id="node-a"} 4`,
		`fakecloud_instance_attach_limit{instance_id="node-b"} 2`,
		`fakecloud_instance_out_of_band_slots{instance_id="node-a"} 1`,
		`fakecloud_quota_used{quota="attachments"} 1`,
		`fakecloud_quota_used{quota="volumes"} 1`,
		`fakecloud_quota_limit{quota="attachments"} 40`,
		`fakecloud_requests_total{code="",route="attachVolume",status="200"} 1`,
		`fakecloud_requests_total{code="VolumeInUse",route="attachVolume",status="409"} 1`,
		"\nfakecloud_transitions_pending 0\n", // a synchronous cloud: nothing under way
		"\nfakecloud_waits_open 0\n",
		fmt.Sprintf("\nfakecloud_waits_limit %d\n", server.DefaultMaxWaits),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !strings.Contains(metrics, "\nfakecloud_revision ") {
		t.Error("metrics lack fakecloud_revision")
	}
}
