package csi

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Volume health (CSI spec v1.13, ControllerGetVolumeHealth, ControllerListVolumeHealth,
// NodeGetVolumeHealth; the API that replaced the removed VOLUME_CONDITION). The controller
// reports the cloud's volume health; the node adds its own check of the backing data.

// Reasons of the health entries this driver reports (CamelCase, CSI VolumeHealthEntry.reason).
const (
	HealthReasonCloudDegraded      = "CloudVolumeDegraded"
	HealthReasonCloudFailed        = "CloudVolumeFailed"
	HealthReasonBackingDataMissing = "BackingDataMissing"
)

// cloudHealth is v's health as CSI entries: none for ok, DEGRADED for degraded, DATA_LOSS for
// failed (the cloud says its data cannot be trusted), each with the cloud's message.
func cloudHealth(v *cloud.Volume) []*csi.VolumeHealth_VolumeHealthEntry {
	msg := "cloud volume health " + string(v.Health)
	if v.HealthMessage != "" {
		msg += ": " + v.HealthMessage
	}
	switch v.Health {
	case cloud.VolumeHealthDegraded:
		return []*csi.VolumeHealth_VolumeHealthEntry{{Status: csi.VolumeHealthErrorType_DEGRADED, Reason: HealthReasonCloudDegraded, Message: msg}}
	case cloud.VolumeHealthFailed:
		return []*csi.VolumeHealth_VolumeHealthEntry{{Status: csi.VolumeHealthErrorType_DATA_LOSS, Reason: HealthReasonCloudFailed, Message: msg}}
	}
	return nil
}

func validateControllerGetVolumeHealthRequest(req *csi.ControllerGetVolumeHealthRequest) error {
	return firstError(checkID("volume_id", req.GetVolumeId()), checkMap("secrets", req.GetSecrets()))
}

func validateControllerListVolumeHealthRequest(req *csi.ControllerListVolumeHealthRequest) error {
	if req.GetMaxEntries() < 0 {
		return invalid("max_entries must not be negative")
	}
	return firstError(checkMap("secrets", req.GetSecrets()), checkPageToken(req.GetStartingToken()))
}

// ControllerGetVolumeHealth reports the cloud's health of one volume (GET_VOLUME_HEALTH): no
// entry when ok, DEGRADED or DATA_LOSS otherwise; NOT_FOUND for a missing volume.
func (s *ControllerServer) ControllerGetVolumeHealth(ctx context.Context, req *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error) {
	if err := validateControllerGetVolumeHealthRequest(req); err != nil {
		return nil, err
	}
	v, err := s.cloud.GetVolume(ctx, req.GetVolumeId())
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "get volume %s", req.GetVolumeId())
	}
	return &csi.ControllerGetVolumeHealthResponse{VolumeHealth: &csi.VolumeHealth{VolumeId: v.ID, HealthStatuses: cloudHealth(v)}}, nil
}

// ControllerListVolumeHealth lists the volumes whose cloud health is not ok
// (LIST_VOLUME_HEALTH), one cloud page (max_entries volumes) at a time: a page may hold fewer
// entries than max_entries, or none, and still have a next_token. A token the cloud rejects
// is ABORTED.
func (s *ControllerServer) ControllerListVolumeHealth(ctx context.Context, req *csi.ControllerListVolumeHealthRequest) (*csi.ControllerListVolumeHealthResponse, error) {
	if err := validateControllerListVolumeHealthRequest(req); err != nil {
		return nil, err
	}
	page, err := s.cloud.ListVolumes(ctx, int(req.GetMaxEntries()), req.GetStartingToken())
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opPage, err, "list volumes")
	}
	resp := &csi.ControllerListVolumeHealthResponse{NextToken: page.NextPageToken}
	for i := range page.Volumes {
		v := &page.Volumes[i]
		if entries := cloudHealth(v); len(entries) > 0 {
			resp.Entries = append(resp.Entries, &csi.VolumeHealth{VolumeId: v.ID, HealthStatuses: entries})
		}
	}
	return resp, nil
}

func validateNodeGetVolumeHealthRequest(req *csi.NodeGetVolumeHealthRequest) error {
	return firstError(validateNodeVolumeID(req.GetVolumeId()), checkPathBounds("volume_publish_path", req.GetVolumePublishPath(), maxPathBytes),
		checkOptionalStagingPath(req.GetStagingTargetPath()), checkCloudVolumeShape(req.GetVolumeId()))
}

// NodeGetVolumeHealth reports a volume's health as this node sees it (GET_VOLUME_HEALTH):
// the cloud's volume health, and, for a volume staged here, whether its backing data is
// still there (INACCESSIBLE, BackingDataMissing, when the folder or block file is gone:
// the node can no longer serve it). A volume not staged here gets the cloud's view only. The
// paths are hints the node does not need: its tracker knows where the volume is staged.
// Errors: NOT_FOUND for a volume the cloud does not have, the cloud's other errors mapped
// as for the controller.
func (n *NodeServer) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	if err := validateNodeGetVolumeHealthRequest(req); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	v, err := n.cfg.Cloud.GetVolume(ctx, id)
	if err != nil {
		return nil, cloudStatus(opDefault, err, "get volume %s", id)
	}
	entries := cloudHealth(v)
	mp, staged, err := n.staged.At(id)
	if err != nil {
		return nil, internalf("staged volumes: %v", err)
	}
	if staged {
		backing := n.dataDir(id)
		if filepath.Base(mp) == stagedBlockFile {
			backing = n.blockFile(id)
		}
		if _, err := os.Stat(backing); errors.Is(err, fs.ErrNotExist) {
			entries = append(entries, &csi.VolumeHealth_VolumeHealthEntry{Status: csi.VolumeHealthErrorType_INACCESSIBLE,
				Reason: HealthReasonBackingDataMissing, Message: "the volume's backing data " + backing + " is gone from this node"})
		} else if err != nil {
			return nil, internalf("backing data of %s: %v", id, err)
		}
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: &csi.VolumeHealth{VolumeId: id, HealthStatuses: entries}}, nil
}

// Reasons of the storage health entries (CSI StorageBackendHealth.reason).
const (
	StorageReasonInstanceImpaired = "InstanceImpaired"
	StorageReasonInstanceStopped  = "InstanceStopped"
	StorageReasonDataDirUnusable  = "DataDirUnusable"
)

// volumesRoot is the folder every volume's backing data lives in on this node.
func (n *NodeServer) volumesRoot() string {
	if n.cfg.DataDir != "" {
		return n.cfg.DataDir
	}
	return filepath.Dir(n.dir.VolumeDir("probe"))
}

// NodeGetStorageHealth reports this node's storage backend (GET_STORAGE_HEALTH): the cloud's
// health of its instance (impaired: STORAGE_DEGRADED, no new attaches; stopped:
// STORAGE_UNREACHABLE) and whether the volumes' data folder takes a file (created and removed
// again; STORAGE_UNREACHABLE, DataDirUnusable, when not). No entry: healthy. Errors: the
// cloud's, mapped as for the controller (the instance's health is then unknown).
func (n *NodeServer) NodeGetStorageHealth(ctx context.Context, _ *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error) {
	inst, err := n.cfg.Cloud.GetInstance(ctx, n.cfg.NodeID)
	if err != nil {
		return nil, cloudStatus(opDefault, err, "get instance %s", n.cfg.NodeID)
	}
	resp := &csi.NodeGetStorageHealthResponse{}
	add := func(st csi.StorageHealthErrorType, reason, msg string) {
		resp.BackendHealth = append(resp.BackendHealth, &csi.NodeGetStorageHealthResponse_StorageBackendHealth{Status: st, Reason: reason, Message: msg})
	}
	msg := "cloud instance health " + string(inst.Health)
	if inst.HealthMessage != "" {
		msg += ": " + inst.HealthMessage
	}
	switch inst.Health {
	case cloud.InstanceHealthImpaired:
		add(csi.StorageHealthErrorType_STORAGE_DEGRADED, StorageReasonInstanceImpaired, msg+"; attaches wait until it returns")
	case cloud.InstanceHealthStopped:
		add(csi.StorageHealthErrorType_STORAGE_UNREACHABLE, StorageReasonInstanceStopped, msg)
	}
	root := n.volumesRoot()
	if err := probeDir(root); err != nil {
		add(csi.StorageHealthErrorType_STORAGE_UNREACHABLE, StorageReasonDataDirUnusable, "the volumes' data folder "+root+" takes no file: "+err.Error())
	}
	return resp, nil
}

// probeDir creates dir if missing and a file in it, and removes the file again.
func probeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".health-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		_ = os.Remove(name)
		return err
	}
	return os.Remove(name)
}
