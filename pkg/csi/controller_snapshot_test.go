package csi

import (
	"context"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// TestGetSnapshot: GET_SNAPSHOT answers the snapshot CreateSnapshot made, the same on every
// call; a missing one is NOT_FOUND, bad input INVALID_ARGUMENT, a cloud outage UNAVAILABLE.
func TestGetSnapshot(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	v := mustCreate(t, s, "v")
	created, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: v.GetVolumeId()})
	wantCode(t, err, codes.OK)
	id := created.GetSnapshot().GetSnapshotId()
	for _, c := range []struct {
		name   string
		req    *csi.GetSnapshotRequest
		inject error
		want   codes.Code
	}{
		{name: "found", req: &csi.GetSnapshotRequest{SnapshotId: id}, want: codes.OK},
		{name: "found again", req: &csi.GetSnapshotRequest{SnapshotId: id}, want: codes.OK},
		{name: "missing", req: &csi.GetSnapshotRequest{SnapshotId: "snap-404"}, want: codes.NotFound},
		{name: "no id", req: &csi.GetSnapshotRequest{}, want: codes.InvalidArgument},
		{name: "id too long", req: &csi.GetSnapshotRequest{SnapshotId: strings.Repeat("x", cloud.MaxIDBytes+1)}, want: codes.InvalidArgument},
		{name: "control character", req: &csi.GetSnapshotRequest{SnapshotId: "a\x00b"}, want: codes.InvalidArgument},
		{name: "cloud down", req: &csi.GetSnapshotRequest{SnapshotId: id}, inject: cloud.NewError(cloud.CodeUnavailable, "down"), want: codes.Unavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.inject != nil {
				f.FailNext(cloudOpGetSnapshot, c.inject)
			}
			resp, err := s.GetSnapshot(ctx, c.req)
			wantCode(t, err, c.want)
			if c.want != codes.OK {
				return
			}
			if !proto.Equal(created.GetSnapshot(), resp.GetSnapshot()) {
				t.Errorf("GetSnapshot = %v, CreateSnapshot answered %v", resp.GetSnapshot(), created.GetSnapshot())
			}
		})
	}
}
