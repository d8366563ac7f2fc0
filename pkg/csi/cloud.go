package csi

import (
	"context"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// ControllerCloud is what the controller service needs from the fake cloud; *cloud.Client
// implements it. Errors are *cloud.Error values (errors.Is with the cloud sentinels) or wrapped
// transport and context errors.
type ControllerCloud interface {
	CreateVolume(ctx context.Context, req cloud.CreateVolumeRequest) (*cloud.Volume, error)
	GetVolume(ctx context.Context, id string) (*cloud.Volume, error)
	// WaitVolume waits, within ctx, for the end of the volume's attach or detach to an
	// instance (cloud.Client.WaitVolume); cloud.ErrWaitUnsupported and cloud.ErrWaitBusy say
	// it did not wait, and the caller polls GetVolume instead.
	WaitVolume(ctx context.Context, id string, w cloud.VolumeWait) (*cloud.Volume, error)
	ListVolumes(ctx context.Context, maxResults int, pageToken string) (*cloud.VolumeList, error)
	DeleteVolume(ctx context.Context, id string) error
	// Attach attaches in the request's mode (cloud.AttachRequest.ReadOnly).
	Attach(ctx context.Context, volumeID string, req cloud.AttachRequest) (*cloud.Attachment, error)
	DetachVolume(ctx context.Context, volumeID, instanceID string) (*cloud.Attachment, error)
	ResizeVolume(ctx context.Context, volumeID string, sizeBytes int64) (*cloud.Volume, error)
	ModifyVolume(ctx context.Context, volumeID string, req cloud.ModifyVolumeRequest) (*cloud.Volume, error)
	CreateSnapshot(ctx context.Context, req cloud.CreateSnapshotRequest) (*cloud.Snapshot, error)
	GetSnapshot(ctx context.Context, id string) (*cloud.Snapshot, error)
	ListSnapshots(ctx context.Context, opts cloud.ListSnapshotsOptions) (*cloud.SnapshotList, error)
	DeleteSnapshot(ctx context.Context, id string) error
	GetQuotas(ctx context.Context) (*cloud.Quotas, error)
	GroupControllerCloud
}

// GroupControllerCloud is what the group controller service needs from the fake cloud: group
// snapshots (docs/fakecloud-api.md, "Group snapshots"). *cloud.Client implements it.
type GroupControllerCloud interface {
	CreateGroupSnapshot(ctx context.Context, req cloud.CreateGroupSnapshotRequest) (*cloud.GroupSnapshot, error)
	GetGroupSnapshot(ctx context.Context, id string) (*cloud.GroupSnapshot, error)
	DeleteGroupSnapshot(ctx context.Context, id string) error
}

// NodeCloud is what the node service needs from the fake cloud: its own instance, for the
// zone it reports as topology, and volumes, for their health. *cloud.Client implements it.
type NodeCloud interface {
	GetInstance(ctx context.Context, id string) (*cloud.Instance, error)
	// GetVolume is the cloud's view of a volume's health, for NodeGetVolumeHealth.
	GetVolume(ctx context.Context, id string) (*cloud.Volume, error)
}

// Cloud is everything a driver process asks of the fake cloud: the controller's and the node's
// calls and the capacity reporter's lookups. *cloud.Client implements it.
type Cloud interface {
	ControllerCloud
	NodeCloud
	capacity.Source
}

// CapacityReporter computes the node's attach capacity (docs/design.md, "Capacity model").
// MaxVolumesPerNode returns the total number of slots this driver may use on the node, to be
// reported as NodeGetInfo.max_volumes_per_node; it must honour ctx. Run does the reporter's
// background work (refreshing the value between kubelet calls) until ctx ends and returns
// nil then; a reporter with nothing to do returns at once. Restore is the reporter's
// start-up step, the only one that reads the state directory: Driver.Run calls it once, after
// taking the state directory's lock and before serving (constructors do no I/O); a reporter
// that persists nothing does nothing. DebugState returns a JSON-encodable snapshot of the
// reporter's state for /debug/capacity. *capacity.Reporter and *capacity.Static implement it.
type CapacityReporter interface {
	MaxVolumesPerNode(ctx context.Context) (int64, error)
	Restore(ctx context.Context)
	Run(ctx context.Context) error
	DebugStater
}
