package csi

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// realCloudClient serves a real fake cloud (default seed, no auth) on a loopback httptest
// server for the test's lifetime and returns a client of it and the server's base URL.
func realCloudClient(t *testing.T) (*admin.Client, string) {
	t.Helper()
	srv, err := server.New(server.Config{Auth: server.AuthNone, Seed: server.DefaultSeed()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	c, err := admin.NewClient(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, hs.URL
}

// realCloudController is a controller on a real fake cloud (loopback httptest server).
func realCloudController(t *testing.T) (*ControllerServer, *admin.Client) {
	t.Helper()
	c, _ := realCloudClient(t)
	if _, err := c.CreateInstance(context.Background(), cloud.CreateInstanceRequest{ID: "node-a", Zone: "zone-a", InstanceType: "small"}); err != nil {
		t.Fatal(err)
	}
	return NewControllerServer(c, nil, nil), c
}

// TestPublishPathLikeVolumeIDIsNotFound: ControllerPublishVolume{volume_id:"../../etc"} is
// NOT_FOUND (CSI spec: the volume does not exist); the ID stays one escaped path segment and
// no other route is reached. Before, the cloud's 301 was followed and the RPC answered
// INTERNAL "GET /etc/attach: not found".
func TestPublishPathLikeVolumeIDIsNotFound(t *testing.T) {
	s, _ := realCloudController(t)
	ctx := context.Background()
	for _, id := range []string{"../../etc", "a/b", "..%2F..", "vol-1/../../x"} {
		_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-a", VolumeCapability: rwo})
		wantCode(t, err, codes.NotFound)
		_, err = s.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
		wantCode(t, err, codes.NotFound)
		_, err = s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
		wantCode(t, err, codes.OK) // deleting what does not exist succeeds
	}
	_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "..", NodeId: "node-a", VolumeCapability: rwo})
	wantCode(t, err, codes.InvalidArgument)
}

// TestControllerBoundsEveryField: an ID or name over 128 bytes (3 MB here), a control
// character, or a map over 4 KiB is INVALID_ARGUMENT before the cloud is asked; a starting
// token over the bound is ABORTED (CSI spec, ListVolumes and ListSnapshots). Before, a 3 MB
// volume ID reached the cloud and came back INTERNAL.
func TestControllerBoundsEveryField(t *testing.T) {
	huge := strings.Repeat("v", 3<<20)
	over := strings.Repeat("o", cloud.MaxIDBytes+1)
	bigMap := map[string]string{"k": strings.Repeat("m", maxMapBytes)}
	ctx := context.Background()
	flags := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	flags.GetMount().MountFlags = []string{over}
	tests := map[string]struct {
		call func(s *ControllerServer) error
		want codes.Code
	}{
		"publish 3 MB volume_id": {func(s *ControllerServer) error {
			_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: huge, NodeId: "i-1", VolumeCapability: rwo})
			return err
		}, codes.InvalidArgument},
		"publish long node_id": {func(s *ControllerServer) error {
			_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: over, VolumeCapability: rwo})
			return err
		}, codes.InvalidArgument},
		"publish node_id with a control character": {func(s *ControllerServer) error {
			_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "i-1\n", VolumeCapability: rwo})
			return err
		}, codes.InvalidArgument},
		"publish big volume_context": {func(s *ControllerServer) error {
			_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "i-1", VolumeCapability: rwo, VolumeContext: bigMap})
			return err
		}, codes.InvalidArgument},
		"unpublish 3 MB volume_id": {func(s *ControllerServer) error {
			_, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: huge, NodeId: "i-1"})
			return err
		}, codes.InvalidArgument},
		"unpublish long node_id": {func(s *ControllerServer) error {
			_, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "v", NodeId: over})
			return err
		}, codes.InvalidArgument},
		"create long name": {func(s *ControllerServer) error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: over, VolumeCapabilities: []*csi.VolumeCapability{rwo}})
			return err
		}, codes.InvalidArgument},
		"create big parameters": {func(s *ControllerServer) error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "n", VolumeCapabilities: []*csi.VolumeCapability{rwo}, Parameters: bigMap})
			return err
		}, codes.InvalidArgument},
		"create long mount flag": {func(s *ControllerServer) error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "n", VolumeCapabilities: []*csi.VolumeCapability{flags}})
			return err
		}, codes.InvalidArgument},
		"create long source snapshot": {func(s *ControllerServer) error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "n", VolumeCapabilities: []*csi.VolumeCapability{rwo},
				VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: huge}}}})
			return err
		}, codes.InvalidArgument},
		"delete 3 MB volume_id": {func(s *ControllerServer) error {
			_, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: huge})
			return err
		}, codes.InvalidArgument},
		"validate long volume_id": {func(s *ControllerServer) error {
			_, err := s.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: over, VolumeCapabilities: []*csi.VolumeCapability{rwo}})
			return err
		}, codes.InvalidArgument},
		"get long volume_id": {func(s *ControllerServer) error {
			_, err := s.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: over})
			return err
		}, codes.InvalidArgument},
		"expand long volume_id": {func(s *ControllerServer) error {
			_, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: over, CapacityRange: &csi.CapacityRange{RequiredBytes: GiB}})
			return err
		}, codes.InvalidArgument},
		"snapshot long name": {func(s *ControllerServer) error {
			_, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: over, SourceVolumeId: "v"})
			return err
		}, codes.InvalidArgument},
		"snapshot long source": {func(s *ControllerServer) error {
			_, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: huge})
			return err
		}, codes.InvalidArgument},
		"delete long snapshot_id": {func(s *ControllerServer) error {
			_, err := s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: over})
			return err
		}, codes.InvalidArgument},
		"list snapshots long filter": {func(s *ControllerServer) error {
			_, err := s.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: over})
			return err
		}, codes.InvalidArgument},
		"list volumes long token": {func(s *ControllerServer) error {
			_, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: huge})
			return err
		}, codes.Aborted},
		"list snapshots long token": {func(s *ControllerServer) error {
			_, err := s.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: over})
			return err
		}, codes.Aborted},
		"capacity big parameters": {func(s *ControllerServer) error {
			_, err := s.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: bigMap})
			return err
		}, codes.InvalidArgument},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s, f := newController(t)
			before := totalCalls(f)
			err := tt.call(s)
			wantCode(t, err, tt.want)
			if msg := status.Convert(err).Message(); len(msg) > 300 {
				t.Fatalf("message of %d bytes echoes the input", len(msg))
			}
			if after := totalCalls(f); after != before {
				t.Fatalf("the cloud was asked (%d -> %d calls)", before, after)
			}
		})
	}
}

// totalCalls counts the fake cloud's calls of every operation.
func totalCalls(f *realCloud) int {
	n := 0
	for _, op := range []cloud.Operation{cloud.OperationCreateVolume, cloud.OperationDeleteVolume, cloud.OperationGetVolume,
		cloud.OperationListVolumes, cloud.OperationAttachVolume, cloud.OperationDetachVolume, cloud.OperationResizeVolume,
		cloud.OperationGetCapacity, cloud.OperationGetInstance, cloud.OperationCreateSnapshot, cloud.OperationDeleteSnapshot,
		cloud.OperationListSnapshots} {
		n += f.Calls(op)
	}
	return n
}

// FuzzControllerValidation: for any strings in the ID, name, token and map fields, the
// controller's validation answers OK, INVALID_ARGUMENT or ABORTED with a short message, and
// what it lets through is an identifier the cloud client will send (cloud.CheckID).
func FuzzControllerValidation(f *testing.F) {
	for _, seed := range [][4]string{
		{"vol-00000001", "node-a", "pvc-1", ""},
		{"../../etc", "node-a", "n", "djE6dm9sLTAwMDAwMDAx"},
		{"..", ".", "", "x"},
		{strings.Repeat("v", 129), "n\x00", "a\x1b", strings.Repeat("t", 200)},
		{"\xff\xfe", "tab\t", "name\n", "tok"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, volID, nodeID, name, token string) {
		check := func(rpc string, err error, ids ...string) {
			t.Helper()
			switch c := status.Code(err); c {
			case codes.OK:
				for _, id := range ids {
					if cloud.CheckID("id", id) != nil {
						t.Fatalf("%s let %q through", rpc, id)
					}
				}
			case codes.InvalidArgument, codes.Aborted:
				if len(status.Convert(err).Message()) > 400 {
					t.Fatalf("%s: message of %d bytes", rpc, len(status.Convert(err).Message()))
				}
			default:
				t.Fatalf("%s: code %s", rpc, c)
			}
		}
		m := map[string]string{name: volID}
		check("publish", validateControllerPublishVolumeRequest(&csi.ControllerPublishVolumeRequest{VolumeId: volID, NodeId: nodeID, VolumeCapability: rwo, VolumeContext: m}), volID, nodeID)
		check("unpublish", validateControllerUnpublishVolumeRequest(&csi.ControllerUnpublishVolumeRequest{VolumeId: volID}), volID)
		check("delete", validateDeleteVolumeRequest(&csi.DeleteVolumeRequest{VolumeId: volID}), volID)
		check("get", validateControllerGetVolumeRequest(&csi.ControllerGetVolumeRequest{VolumeId: volID}), volID)
		check("snapshot", validateCreateSnapshotRequest(&csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: volID}), volID)
		check("delete snapshot", validateDeleteSnapshotRequest(&csi.DeleteSnapshotRequest{SnapshotId: volID}), volID)
		check("list volumes", validateListVolumesRequest(&csi.ListVolumesRequest{StartingToken: token}))
		check("list snapshots", validateListSnapshotsRequest(&csi.ListSnapshotsRequest{StartingToken: token, SourceVolumeId: volID}))
		err := validateCreateVolumeRequest(&csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{rwo}, Parameters: m})
		check("create", err)
		if err == nil && cloud.CheckName("name", name) != nil {
			t.Fatalf("create let the name %q through", name)
		}
	})
}
