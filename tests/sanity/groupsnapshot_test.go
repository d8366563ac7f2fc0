package sanity_test

import (
	"context"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/tests/teststack"
)

// TestVolumeGroupSnapshot drives a group snapshot through the driver's gRPC socket and the
// real fake cloud: the group is one cloud object whose members share its revision (one store
// transaction), a member restores a volume, deleting a member alone is FAILED_PRECONDITION,
// and deleting the group removes every member from the cloud.
func TestVolumeGroupSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a real fake cloud and driver")
	}
	s := teststack.Start(t, teststack.Config{AttachLimit: 8, Instances: []string{"node-1"}})
	ctx := context.Background()
	ctrl, group := csi.NewControllerClient(s.Conn), csi.NewGroupControllerClient(s.Conn)
	vols := []string{s.CreateVolume(t, "db-data"), s.CreateVolume(t, "db-log"), s.CreateVolume(t, "db-wal")}

	resp, err := group.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "db", SourceVolumeIds: vols})
	if err != nil {
		t.Fatal(err)
	}
	gs := resp.GetGroupSnapshot()
	cg, err := s.Admin.GetGroupSnapshot(ctx, gs.GetGroupSnapshotId())
	if err != nil {
		t.Fatalf("the group is not a cloud object: %v", err)
	}
	want := slices.Sorted(slices.Values(vols))
	if !slices.Equal(cg.SourceVolumeIDs, want) || len(cg.Snapshots) != len(vols) {
		t.Fatalf("cloud group %+v, want members of %v", cg, want)
	}
	for i, m := range cg.Snapshots {
		if m.Revision != cg.Revision || !m.CreatedAt.Equal(cg.CreatedAt) || m.ID != gs.GetSnapshots()[i].GetSnapshotId() {
			t.Errorf("member %s at revision %d; the group at %d: not one point in time, or not what the driver answered", m.ID, m.Revision, cg.Revision)
		}
	}

	member := gs.GetSnapshots()[0].GetSnapshotId()
	if _, err := ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: member}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DeleteSnapshot of a member: %v, want FailedPrecondition", err)
	}
	if _, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{teststack.MountCapability()},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: member}}}}); err != nil {
		t.Errorf("restore from a member: %v", err)
	}
	if _, err := group.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gs.GetGroupSnapshotId(), SnapshotIds: cg.SnapshotIDs()}); err != nil {
		t.Fatal(err)
	}
	for _, m := range cg.Snapshots {
		if _, err := s.Admin.GetSnapshot(ctx, m.ID); cloud.CodeOf(err) != cloud.CodeSnapshotNotFound {
			t.Errorf("member %s after the group's delete: %v, want SnapshotNotFound", m.ID, err)
		}
	}
	if _, err := group.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: gs.GetGroupSnapshotId()}); status.Code(err) != codes.NotFound {
		t.Errorf("GetVolumeGroupSnapshot after delete: %v, want NotFound", err)
	}
}
