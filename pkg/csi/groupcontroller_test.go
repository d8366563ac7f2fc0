package csi

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// newGroupController is a group controller and a controller sharing one fake cloud and one
// in-flight guard, as Driver builds them.
func newGroupController(t *testing.T) (*GroupControllerServer, *ControllerServer, *realCloud) {
	t.Helper()
	s, f := newController(t)
	return NewGroupControllerServer(f, s.inflight, nil), s, f
}

func memberIDs(g *csi.VolumeGroupSnapshot) []string {
	var out []string
	for _, m := range g.GetSnapshots() {
		out = append(out, m.GetSnapshotId())
	}
	return out
}

// TestCreateVolumeGroupSnapshot: a group of volumes in one zone is cut with one member per
// volume, all at the group's time and carrying its ID; the same name and volumes in another
// order is the same group; bad input is INVALID_ARGUMENT and reaches no cloud; another set
// under the name ALREADY_EXISTS, a missing volume NOT_FOUND, volumes across zones
// FAILED_PRECONDITION, a cloud outage UNAVAILABLE.
func TestCreateVolumeGroupSnapshot(t *testing.T) {
	ctx := context.Background()
	g, s, f := newGroupController(t)
	v1, v2 := mustCreate(t, s, "v1").GetVolumeId(), mustCreate(t, s, "v2").GetVolumeId()
	vb, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "vb", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		AccessibilityRequirements: &csi.TopologyRequirement{Preferred: topologyOf("zone-b")}})
	wantCode(t, err, codes.OK)
	first, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "grp", SourceVolumeIds: []string{v2, v1}})
	wantCode(t, err, codes.OK)
	gs := first.GetGroupSnapshot()
	if gs.GetGroupSnapshotId() == "" || len(gs.GetSnapshots()) != 2 || !gs.GetReadyToUse() {
		t.Fatalf("group = %v, want an ID and 2 ready members", gs)
	}
	var sources []string
	for _, m := range gs.GetSnapshots() {
		sources = append(sources, m.GetSourceVolumeId())
		if m.GetGroupSnapshotId() != gs.GetGroupSnapshotId() || !proto.Equal(m.GetCreationTime(), gs.GetCreationTime()) || !m.GetReadyToUse() {
			t.Errorf("member %v: want group %s, time %v, ready", m, gs.GetGroupSnapshotId(), gs.GetCreationTime())
		}
	}
	if want := []string{v1, v2}; !slices.Equal(sources, want) {
		t.Errorf("members of %v, want %v", sources, want)
	}
	tooMany := make([]string, cloud.MaxGroupSnapshotMembers+1)
	for i := range tooMany {
		tooMany[i] = "vol-" + strconv.Itoa(i)
	}
	for _, c := range []struct {
		name   string
		req    *csi.CreateVolumeGroupSnapshotRequest
		inject error
		want   codes.Code
	}{
		{name: "same name and volumes, other order", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "grp", SourceVolumeIds: []string{v1, v2}}, want: codes.OK},
		{name: "no name", req: &csi.CreateVolumeGroupSnapshotRequest{SourceVolumeIds: []string{v1}}, want: codes.InvalidArgument},
		{name: "name too long", req: &csi.CreateVolumeGroupSnapshotRequest{Name: strings.Repeat("n", cloud.MaxIDBytes+1), SourceVolumeIds: []string{v1}}, want: codes.InvalidArgument},
		{name: "banned character in name", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "a\x01", SourceVolumeIds: []string{v1}}, want: codes.InvalidArgument},
		{name: "no volumes", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "x"}, want: codes.InvalidArgument},
		{name: "a volume twice", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "x", SourceVolumeIds: []string{v1, v1}}, want: codes.InvalidArgument},
		{name: "an empty volume ID", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "x", SourceVolumeIds: []string{v1, ""}}, want: codes.InvalidArgument},
		{name: "too many volumes", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "x", SourceVolumeIds: tooMany}, want: codes.InvalidArgument},
		{name: "parameters too large", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "x", SourceVolumeIds: []string{v1},
			Parameters: map[string]string{"k": strings.Repeat("v", maxMapBytes)}}, want: codes.InvalidArgument},
		{name: "same name, other volumes", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "grp", SourceVolumeIds: []string{v1}}, want: codes.AlreadyExists},
		{name: "missing volume", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "x", SourceVolumeIds: []string{v1, "vol-404"}}, want: codes.NotFound},
		{name: "volumes in two zones", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "x", SourceVolumeIds: []string{v1, vb.GetVolume().GetVolumeId()}}, want: codes.FailedPrecondition},
		{name: "cloud down", req: &csi.CreateVolumeGroupSnapshotRequest{Name: "x", SourceVolumeIds: []string{v1}},
			inject: cloud.NewError(cloud.CodeUnavailable, "down"), want: codes.Unavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.inject != nil {
				f.FailNext(cloud.OperationCreateGroupSnapshot, c.inject)
			}
			calls := f.Calls(cloud.OperationCreateGroupSnapshot)
			resp, err := g.CreateVolumeGroupSnapshot(ctx, c.req)
			wantCode(t, err, c.want)
			if c.want == codes.InvalidArgument && f.Calls(cloud.OperationCreateGroupSnapshot) != calls {
				t.Errorf("an invalid request reached the cloud")
			}
			if c.want == codes.OK && !proto.Equal(resp.GetGroupSnapshot(), gs) {
				t.Errorf("repeat answered %v, the first call %v", resp.GetGroupSnapshot(), gs)
			}
		})
	}
	// Nothing refused above took a name: "x" is free.
	_, err = g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "x", SourceVolumeIds: []string{v2}})
	wantCode(t, err, codes.OK)
}

// TestCreateVolumeGroupSnapshotInFlight: a second create of the same name while the first
// waits for the cloud is ABORTED; the first then succeeds.
func TestCreateVolumeGroupSnapshotInFlight(t *testing.T) {
	ctx := context.Background()
	g, s, f := newGroupController(t)
	v := mustCreate(t, s, "v").GetVolumeId()
	entered, release := make(chan struct{}), make(chan struct{})
	f.SetHook(cloud.OperationCreateGroupSnapshot, func(ctx context.Context) error {
		close(entered)
		<-release
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "grp", SourceVolumeIds: []string{v}})
		done <- err
	}()
	<-entered
	_, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "grp", SourceVolumeIds: []string{v}})
	wantCode(t, err, codes.Aborted)
	close(release)
	wantCode(t, <-done, codes.OK)
}

// TestGetAndDeleteVolumeGroupSnapshot: Get answers what Create did; snapshot_ids other than
// the members are INVALID_ARGUMENT and delete nothing; a member cannot be deleted alone
// (FAILED_PRECONDITION) but restores a volume; Delete removes the group and its members and
// is OK when repeated; Get of a deleted group is NOT_FOUND.
func TestGetAndDeleteVolumeGroupSnapshot(t *testing.T) {
	ctx := context.Background()
	g, s, f := newGroupController(t)
	v1, v2 := mustCreate(t, s, "v1").GetVolumeId(), mustCreate(t, s, "v2").GetVolumeId()
	resp, err := g.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "grp", SourceVolumeIds: []string{v1, v2}})
	wantCode(t, err, codes.OK)
	gs := resp.GetGroupSnapshot()
	id, members := gs.GetGroupSnapshotId(), memberIDs(gs)
	reversed := slices.Clone(members)
	slices.Reverse(reversed)
	for _, c := range []struct {
		name   string
		req    *csi.GetVolumeGroupSnapshotRequest
		inject error
		want   codes.Code
	}{
		{name: "found", req: &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id}, want: codes.OK},
		{name: "found with its members in any order", req: &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: reversed}, want: codes.OK},
		{name: "members mismatch", req: &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: members[:1]}, want: codes.InvalidArgument},
		{name: "missing", req: &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "gsnap-404"}, want: codes.NotFound},
		{name: "no id", req: &csi.GetVolumeGroupSnapshotRequest{}, want: codes.InvalidArgument},
		{name: "id too long", req: &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: strings.Repeat("x", cloud.MaxIDBytes+1)}, want: codes.InvalidArgument},
		{name: "bad snapshot id", req: &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: []string{"a\x00"}}, want: codes.InvalidArgument},
		{name: "cloud down", req: &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id}, inject: cloud.NewError(cloud.CodeUnavailable, "down"), want: codes.Unavailable},
	} {
		t.Run("get "+c.name, func(t *testing.T) {
			if c.inject != nil {
				f.FailNext(cloudOpGetGroupSnapshot, c.inject)
			}
			got, err := g.GetVolumeGroupSnapshot(ctx, c.req)
			wantCode(t, err, c.want)
			if c.want == codes.OK && !proto.Equal(got.GetGroupSnapshot(), gs) {
				t.Errorf("Get = %v, Create answered %v", got.GetGroupSnapshot(), gs)
			}
		})
	}

	_, err = s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: members[0]})
	wantCode(t, err, codes.FailedPrecondition)
	restored, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: members[0]}}}})
	wantCode(t, err, codes.OK)
	if got := restored.GetVolume().GetContentSource().GetSnapshot().GetSnapshotId(); got != members[0] {
		t.Errorf("restored from %q, want the member %s", got, members[0])
	}
	listed, err := s.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: members[1]})
	wantCode(t, err, codes.OK)
	if e := listed.GetEntries(); len(e) != 1 || e[0].GetSnapshot().GetGroupSnapshotId() != id {
		t.Errorf("ListSnapshots of a member = %v, want it with group_snapshot_id %s", e, id)
	}

	for _, c := range []struct {
		name   string
		req    *csi.DeleteVolumeGroupSnapshotRequest
		inject error
		want   codes.Code
	}{
		{name: "no id", req: &csi.DeleteVolumeGroupSnapshotRequest{}, want: codes.InvalidArgument},
		{name: "members mismatch", req: &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: []string{members[0], "snap-x"}}, want: codes.InvalidArgument},
		{name: "too many snapshot ids", req: &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: make([]string, cloud.MaxGroupSnapshotMembers+1)}, want: codes.InvalidArgument},
		{name: "cloud down", req: &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id}, inject: cloud.NewError(cloud.CodeUnavailable, "down"), want: codes.Unavailable},
		{name: "deleted", req: &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: reversed}, want: codes.OK},
		{name: "deleted again", req: &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, SnapshotIds: reversed}, want: codes.OK},
		{name: "never existed", req: &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "gsnap-404"}, want: codes.OK},
	} {
		t.Run("delete "+c.name, func(t *testing.T) {
			if c.inject != nil {
				f.FailNext(cloud.OperationDeleteGroupSnapshot, c.inject)
			}
			_, err := g.DeleteVolumeGroupSnapshot(ctx, c.req)
			wantCode(t, err, c.want)
			if c.want != codes.OK {
				if _, err := g.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id}); err != nil {
					t.Errorf("a refused delete removed the group: %v", err)
				}
			}
		})
	}
	_, err = g.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id})
	wantCode(t, err, codes.NotFound)
	for _, m := range members {
		_, err := s.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: m})
		wantCode(t, err, codes.NotFound)
	}
}

// TestGroupControllerCapabilities: the one group capability, and the identity service
// advertises the group controller service exactly when it advertises the controller.
func TestGroupControllerCapabilities(t *testing.T) {
	g, _, _ := newGroupController(t)
	caps, err := g.GroupControllerGetCapabilities(context.Background(), &csi.GroupControllerGetCapabilitiesRequest{})
	wantCode(t, err, codes.OK)
	if c := caps.GetCapabilities(); len(c) != 1 || c[0].GetRpc().GetType() != csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT {
		t.Errorf("capabilities = %v", c)
	}
	for _, controller := range []bool{true, false} {
		resp, err := NewIdentityServer("v", controller, NewReadiness(controller, !controller)).GetPluginCapabilities(context.Background(), &csi.GetPluginCapabilitiesRequest{})
		wantCode(t, err, codes.OK)
		group := false
		for _, c := range resp.GetCapabilities() {
			group = group || c.GetService().GetType() == csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE
		}
		if group != controller {
			t.Errorf("controller %v: GROUP_CONTROLLER_SERVICE advertised %v", controller, group)
		}
	}
}
