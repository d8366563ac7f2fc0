package csi

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func cloneOf(name, src string, required int64, requisite ...string) *csi.CreateVolumeRequest {
	req := &csi.CreateVolumeRequest{
		Name: name, VolumeCapabilities: []*csi.VolumeCapability{rwo},
		CapacityRange: &csi.CapacityRange{RequiredBytes: required},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}},
	}
	if len(requisite) > 0 {
		req.AccessibilityRequirements = &csi.TopologyRequirement{}
		for _, z := range requisite {
			req.AccessibilityRequirements.Requisite = append(req.AccessibilityRequirements.Requisite,
				&csi.Topology{Segments: map[string]string{TopologyZoneKey: z}})
		}
	}
	return req
}

// TestCloneVolume: CLONE_VOLUME creates a volume from a volume source in the source's zone,
// at least its size, with the source in its content source and volume context; the same
// request again is the same volume; a missing source NOT_FOUND, a zone the requisite
// topology excludes or a bad source ID INVALID_ARGUMENT, a size below the source OUT_OF_RANGE,
// the same name from another source ALREADY_EXISTS.
func TestCloneVolume(t *testing.T) {
	ctx := context.Background()
	s, _ := newController(t)
	src, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "src", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		CapacityRange:             &csi.CapacityRange{RequiredBytes: 2 * GiB},
		AccessibilityRequirements: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{TopologyZoneKey: "zone-b"}}}}})
	wantCode(t, err, codes.OK)
	srcID := src.GetVolume().GetVolumeId()
	other := mustCreate(t, s, "other")

	var first string
	for _, c := range []struct {
		name string
		req  *csi.CreateVolumeRequest
		want codes.Code
	}{
		{"clone", cloneOf("c", srcID, 0), codes.OK},
		{"clone again", cloneOf("c", srcID, 0), codes.OK},
		{"requisite allows the source's zone", cloneOf("c2", srcID, 3*GiB, "zone-a", "zone-b"), codes.OK},
		{"missing source", cloneOf("c3", "vol-404", 0), codes.NotFound},
		{"requisite excludes the source's zone", cloneOf("c4", srcID, 0, "zone-a"), codes.InvalidArgument},
		{"smaller than the source", cloneOf("c5", srcID, GiB), codes.OutOfRange},
		{"no source ID", cloneOf("c6", "", 0), codes.InvalidArgument},
		{"source ID with a control character", cloneOf("c7", "vol\x00", 0), codes.InvalidArgument},
		{"same name, other source", cloneOf("c", other.GetVolumeId(), 0), codes.AlreadyExists},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := s.CreateVolume(ctx, c.req)
			wantCode(t, err, c.want)
			if c.want != codes.OK {
				return
			}
			v := resp.GetVolume()
			if got := v.GetContentSource().GetVolume().GetVolumeId(); got != srcID {
				t.Errorf("content source %q, want %q", got, srcID)
			}
			if got := v.GetVolumeContext()[VolumeContextSourceVolume]; got != srcID {
				t.Errorf("volume_context[%s] = %q, want %q", VolumeContextSourceVolume, got, srcID)
			}
			if z := v.GetAccessibleTopology()[0].GetSegments()[TopologyZoneKey]; z != "zone-b" {
				t.Errorf("clone in zone %q, want the source's zone-b", z)
			}
			if v.GetCapacityBytes() < src.GetVolume().GetCapacityBytes() {
				t.Errorf("clone of %d bytes, source %d", v.GetCapacityBytes(), src.GetVolume().GetCapacityBytes())
			}
			if c.req.GetName() == "c" {
				if first == "" {
					first = v.GetVolumeId()
				} else if v.GetVolumeId() != first {
					t.Errorf("repeated clone is %s, first %s", v.GetVolumeId(), first)
				}
			}
		})
	}
}
