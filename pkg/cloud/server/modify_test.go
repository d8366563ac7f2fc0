package server_test

import (
	"context"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestModifyVolumeOverHTTP: a modify sets type and iops with a new revision and a
// VolumeModified event; the same values again change nothing (no revision, no event); bad
// values and a missing volume are refused and change nothing.
func TestModifyVolumeOverHTTP(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	ssd, iops := cloud.VolumeTypeSSD, 3000
	m := must[*cloud.Volume](t)(tc.driver.ModifyVolume(ctx, v.ID, cloud.ModifyVolumeRequest{Type: &ssd, IOPS: &iops}))
	if m.Type != ssd || m.IOPS != iops || m.Revision <= v.Revision {
		t.Fatalf("modified = %+v, want ssd, 3000 iops and a new revision", m)
	}
	again := must[*cloud.Volume](t)(tc.driver.ModifyVolume(ctx, v.ID, cloud.ModifyVolumeRequest{Type: &ssd, IOPS: &iops}))
	if again.Revision != m.Revision {
		t.Errorf("the same modify bumped the revision %d -> %d", m.Revision, again.Revision)
	}
	modified := 0
	for _, e := range must[[]cloud.Event](t)(tc.reader.ListEvents(ctx, 0)) {
		if e.Type == "VolumeModified" {
			modified++
		}
	}
	if modified != 1 {
		t.Errorf("%d VolumeModified events, want 1", modified)
	}
	standard, tape, low := cloud.VolumeTypeStandard, "tape", 5
	for _, c := range []struct {
		name string
		id   string
		req  cloud.ModifyVolumeRequest
		want cloud.Code
	}{
		{"standard with iops", v.ID, cloud.ModifyVolumeRequest{Type: &standard}, cloud.CodeInvalidArgument},
		{"unknown type", v.ID, cloud.ModifyVolumeRequest{Type: &tape}, cloud.CodeInvalidArgument},
		{"iops too low", v.ID, cloud.ModifyVolumeRequest{IOPS: &low}, cloud.CodeInvalidArgument},
		{"missing volume", "vol-404", cloud.ModifyVolumeRequest{Type: &ssd}, cloud.CodeVolumeNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tc.driver.ModifyVolume(ctx, c.id, c.req)
			wantCode(t, err, c.want)
		})
	}
	if got := must[*cloud.Volume](t)(tc.reader.GetVolume(ctx, v.ID)); got.Type != ssd || got.IOPS != iops || got.Revision != m.Revision {
		t.Errorf("refused modifies changed the volume: %+v", got)
	}
	if _, err := tc.reader.ModifyVolume(ctx, v.ID, cloud.ModifyVolumeRequest{Type: &ssd}); cloud.CodeOf(err) != cloud.CodeAccessDenied {
		t.Errorf("a reader's modify: %v, want AccessDenied", err)
	}
}
