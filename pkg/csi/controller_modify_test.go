package csi

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// TestControllerModifyVolume: MODIFY_VOLUME sets type and iops, the same values again are OK
// and change nothing, bad keys and values are INVALID_ARGUMENT, a missing volume NOT_FOUND.
func TestControllerModifyVolume(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	id := mustCreate(t, s, "v").GetVolumeId()
	volume := func() cloud.Volume {
		for _, v := range f.Volumes() {
			if v.ID == id {
				return v
			}
		}
		t.Fatalf("volume %s gone", id)
		return cloud.Volume{}
	}
	for _, c := range []struct {
		name     string
		id       string
		params   map[string]string
		inject   error
		want     codes.Code
		wantType string
		wantIOPS int
	}{
		{name: "to ssd with iops", params: map[string]string{"type": "ssd", "iops": "3000"}, want: codes.OK, wantType: "ssd", wantIOPS: 3000},
		{name: "the same again", params: map[string]string{"type": "ssd", "iops": "3000"}, want: codes.OK, wantType: "ssd", wantIOPS: 3000},
		{name: "iops only", params: map[string]string{"iops": "5000"}, want: codes.OK, wantType: "ssd", wantIOPS: 5000},
		{name: "nothing asked", params: nil, want: codes.OK, wantType: "ssd", wantIOPS: 5000},
		{name: "unknown key", params: map[string]string{"XXX_FakeKey": "x"}, want: codes.InvalidArgument, wantType: "ssd", wantIOPS: 5000},
		{name: "unknown type", params: map[string]string{"type": "tape"}, want: codes.InvalidArgument, wantType: "ssd", wantIOPS: 5000},
		{name: "iops not a number", params: map[string]string{"iops": "fast"}, want: codes.InvalidArgument, wantType: "ssd", wantIOPS: 5000},
		{name: "iops out of range", params: map[string]string{"iops": "99"}, want: codes.InvalidArgument, wantType: "ssd", wantIOPS: 5000},
		{name: "standard keeps iops", params: map[string]string{"type": "standard"}, want: codes.InvalidArgument, wantType: "ssd", wantIOPS: 5000},
		{name: "back to standard", params: map[string]string{"type": "standard", "iops": "0"}, want: codes.OK, wantType: "standard"},
		{name: "missing volume", id: "vol-404", params: map[string]string{"type": "ssd"}, want: codes.NotFound, wantType: "standard"},
		{name: "no volume id", id: "-", params: map[string]string{"type": "ssd"}, want: codes.InvalidArgument, wantType: "standard"},
		{name: "cloud throttles", params: map[string]string{"type": "nvme"}, inject: cloud.NewError(cloud.CodeThrottled, "slow down"), want: codes.Unavailable, wantType: "standard"},
	} {
		t.Run(c.name, func(t *testing.T) {
			vid := id
			switch c.id {
			case "":
			case "-":
				vid = ""
			default:
				vid = c.id
			}
			if c.inject != nil {
				f.FailNext(cloud.OperationModifyVolume, c.inject)
			}
			_, err := s.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: vid, MutableParameters: c.params})
			wantCode(t, err, c.want)
			v := volume()
			if v.Type != c.wantType || v.IOPS != c.wantIOPS {
				t.Errorf("volume type %q iops %d, want %q %d", v.Type, v.IOPS, c.wantType, c.wantIOPS)
			}
		})
	}
}

// TestCreateVolumeWithMutableParameters: CreateVolume applies mutable_parameters (a
// VolumeAttributesClass), refuses bad ones before creating anything, and stays idempotent.
func TestCreateVolumeWithMutableParameters(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	req := func(name string, params map[string]string) *csi.CreateVolumeRequest {
		return &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{rwo}, MutableParameters: params}
	}
	for i := 0; i < 2; i++ {
		_, err := s.CreateVolume(ctx, req("fast", map[string]string{"type": "nvme", "iops": "16000"}))
		wantCode(t, err, codes.OK)
	}
	for _, bad := range []map[string]string{{"XXX_FakeKey": "XXX_FakeValue"}, {"iops": "3000"}, {"type": "standard", "iops": "3000"}} {
		_, err := s.CreateVolume(ctx, req("bad", bad))
		wantCode(t, err, codes.InvalidArgument)
	}
	vols := f.Volumes()
	if len(vols) != 1 || vols[0].Type != "nvme" || vols[0].IOPS != 16000 {
		t.Errorf("volumes %+v, want one nvme volume with 16000 iops", vols)
	}
}
