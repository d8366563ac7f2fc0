package csi

import (
	"context"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// GroupControllerServer is the CSI group controller service (CSI spec v1.13, "Group
// Controller Service RPC"): volume group snapshots, each one cloud object
// (POST /v1/group-snapshots) whose members the cloud cuts in one store transaction, so they
// share one point in time. Every error it returns is a gRPC status error.
type GroupControllerServer struct {
	csi.UnimplementedGroupControllerServer
	cloud GroupControllerCloud
	// inflight is the controller service's: a group snapshot's name and ID are keys beside
	// the volumes and snapshots, counted by the same gauge.
	inflight *inflight
	cloudOK  func()
	// snapData keeps the members' data for the volumes restored from them, as the controller
	// service does for plain snapshots; the zero value keeps none (set by New from
	// --volume-data-dir).
	snapData snapshotData
}

var _ csi.GroupControllerServer = (*GroupControllerServer)(nil)

// NewGroupControllerServer returns the group controller service using c. in is the guard of
// operations in flight it shares with the controller service (nil: a guard of its own);
// cloudOK, if not nil, is called whenever a cloud call succeeded (readiness).
func NewGroupControllerServer(c GroupControllerCloud, in *inflight, cloudOK func()) *GroupControllerServer {
	if in == nil {
		in = newInflight()
	}
	if cloudOK == nil {
		cloudOK = func() {}
	}
	return &GroupControllerServer{cloud: c, inflight: in, cloudOK: cloudOK}
}

// ok passes err through and reports a successful cloud call when err is nil.
func (s *GroupControllerServer) ok(err error) error {
	if err == nil {
		s.cloudOK()
	}
	return err
}

// GroupControllerGetCapabilities advertises CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT.
func (s *GroupControllerServer) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT,
		}},
	}}}, nil
}

// csiGroupSnapshot is g in CSI's shape: every member carries the group's ID, as the spec
// requires of a member's Snapshot.group_snapshot_id.
func csiGroupSnapshot(g *cloud.GroupSnapshot) *csi.VolumeGroupSnapshot {
	out := &csi.VolumeGroupSnapshot{GroupSnapshotId: g.ID, CreationTime: timestamppb.New(g.CreatedAt), ReadyToUse: g.ReadyToUse,
		Snapshots: make([]*csi.Snapshot, 0, len(g.Snapshots))}
	for i := range g.Snapshots {
		out.Snapshots = append(out.Snapshots, csiSnapshot(&g.Snapshots[i]))
	}
	return out
}

// CreateVolumeGroupSnapshot snapshots the source volumes at one point in time, idempotent by
// name: the same name and set of volumes (in any order) is the existing group, another set
// ALREADY_EXISTS; a missing volume NOT_FOUND; volumes in more than one zone
// FAILED_PRECONDITION (the spec's "cannot snapshot multiple volumes together"); a second
// call for the same name while one runs ABORTED. Either every member is cut or none is (the
// cloud cuts them in one transaction), so a failure leaks no snapshot. With a volume data
// folder every member's source data is copied, all as of one point in time and all or none
// (snapshotData.captureGroup); when that fails (copyStatus: FAILED_PRECONDITION,
// UNAVAILABLE, INTERNAL) the cloud group is deleted again, so a failed call leaves nothing.
func (s *GroupControllerServer) CreateVolumeGroupSnapshot(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	if err := validateCreateVolumeGroupSnapshotRequest(req); err != nil {
		return nil, err
	}
	key := "group-snapshot/" + req.GetName()
	if !s.inflight.tryAcquire(key) {
		return nil, aborted(req.GetName())
	}
	defer s.inflight.release(key)
	g, err := s.cloud.CreateGroupSnapshot(ctx, cloud.CreateGroupSnapshotRequest{Name: req.GetName(), SourceVolumeIDs: req.GetSourceVolumeIds()})
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "group snapshot %s of %s", req.GetName(), plural.Of(len(req.GetSourceVolumeIds()), "volume", "volumes"))
	}
	if err := s.snapData.captureGroup(ctx, groupMembers(g)); err != nil {
		return nil, undoCreate(ctx, err, "group snapshot", g.ID, func(ctx context.Context) error {
			return s.ok(s.cloud.DeleteGroupSnapshot(ctx, g.ID))
		})
	}
	klog.FromContext(ctx).V(2).Info("Group snapshot created", "groupSnapshotID", g.ID, "volumes", len(g.Snapshots))
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: csiGroupSnapshot(g)}, nil
}

// groupMembers are g's members for snapshotData.
func groupMembers(g *cloud.GroupSnapshot) []snapshotMember {
	out := make([]snapshotMember, 0, len(g.Snapshots))
	for _, m := range g.Snapshots {
		out = append(out, snapshotMember{volID: m.SourceVolumeID, snapID: m.ID})
	}
	return out
}

// checkMembers is the spec's "snapshot list mismatch": when the CO lists the group's
// snapshot IDs (it is REQUIRED, but csi-sanity and older COs send none), they must be the
// group's members exactly, in any order; INVALID_ARGUMENT otherwise.
func checkMembers(g *cloud.GroupSnapshot, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	have, want := g.SnapshotIDs(), slices.Clone(ids)
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		return status.Errorf(codes.InvalidArgument, "snapshot_ids (%d) are not the members of group snapshot %s (%d)", len(ids), g.ID, len(have))
	}
	return nil
}

// GetVolumeGroupSnapshot returns a group snapshot with its members; NOT_FOUND when it does
// not exist, INVALID_ARGUMENT when snapshot_ids are not its members.
func (s *GroupControllerServer) GetVolumeGroupSnapshot(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	if err := validateGetVolumeGroupSnapshotRequest(req); err != nil {
		return nil, err
	}
	g, err := s.cloud.GetGroupSnapshot(ctx, req.GetGroupSnapshotId())
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "get group snapshot %s", req.GetGroupSnapshotId())
	}
	if err := checkMembers(g, req.GetSnapshotIds()); err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: csiGroupSnapshot(g)}, nil
}

// DeleteVolumeGroupSnapshot deletes a group snapshot with all its members and their data; one
// that does not exist is success. snapshot_ids that are not its members are INVALID_ARGUMENT
// and delete nothing. A second call for the same group while one runs is ABORTED. The data
// goes first: a failure after it leaves a group the CO is deleting anyway, never data no
// group names.
func (s *GroupControllerServer) DeleteVolumeGroupSnapshot(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	if err := validateDeleteVolumeGroupSnapshotRequest(req); err != nil {
		return nil, err
	}
	id := req.GetGroupSnapshotId()
	key := "group-snapshot-id/" + id
	if !s.inflight.tryAcquire(key) {
		return nil, aborted(id)
	}
	defer s.inflight.release(key)
	if len(req.GetSnapshotIds()) > 0 || s.snapData.dir != "" {
		// Members never change, so a check before the delete holds at the delete.
		g, err := s.cloud.GetGroupSnapshot(ctx, id)
		if err := s.ok(err); err != nil {
			return nil, cloudStatus(opGone, err, "get group snapshot %s", id)
		}
		if g == nil {
			return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
		}
		if err := checkMembers(g, req.GetSnapshotIds()); err != nil {
			return nil, err
		}
		if err := s.snapData.removeAll(ctx, groupMembers(g)); err != nil {
			return nil, err
		}
	}
	if err := cloudStatus(opGone, s.ok(s.cloud.DeleteGroupSnapshot(ctx, id)), "delete group snapshot %s", id); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Group snapshot deleted", "groupSnapshotID", id)
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}
