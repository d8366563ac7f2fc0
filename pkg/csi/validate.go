package csi

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The validateXRequest functions check the shape of a request before anything else happens and
// return only INVALID_ARGUMENT errors (or nil), so that bad input changes nothing.

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// capabilityProblem reports why c is malformed or unsupported by this driver, or "" when it is
// fine. The cloud attaches a volume to one instance at a time, so only single-node access modes
// work; both access types (mount: a bind-mounted folder, block: a bind-mounted file) do.
func capabilityProblem(c *csi.VolumeCapability) string {
	if c == nil {
		return "volume capability is nil"
	}
	if c.GetBlock() == nil && c.GetMount() == nil {
		return "volume capability has no access type (mount or block)"
	}
	if c.GetAccessMode() == nil {
		return "volume capability has no access mode"
	}
	switch m := c.GetAccessMode().GetMode(); m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		return ""
	default:
		return fmt.Sprintf("access mode %s is not supported: a volume attaches to one node", m)
	}
}

func validateCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return invalid("volume_capabilities is required")
	}
	for _, c := range caps {
		if p := capabilityProblem(c); p != "" {
			return invalid("%s", p)
		}
	}
	return nil
}

func validateCapabilityRange(r *csi.CapacityRange) error {
	if r == nil {
		return nil
	}
	if r.GetRequiredBytes() < 0 || r.GetLimitBytes() < 0 {
		return invalid("capacity_range bytes must not be negative")
	}
	return nil
}

func validateCreateVolumeRequest(req *csi.CreateVolumeRequest) error {
	if req.GetName() == "" {
		return invalid("name is required")
	}
	if err := validateCapabilities(req.GetVolumeCapabilities()); err != nil {
		return err
	}
	if err := validateCapabilityRange(req.GetCapacityRange()); err != nil {
		return err
	}
	if src := req.GetVolumeContentSource(); src != nil {
		switch {
		case src.GetSnapshot() != nil:
			if src.GetSnapshot().GetSnapshotId() == "" {
				return invalid("volume_content_source.snapshot.snapshot_id is required")
			}
		case src.GetVolume() != nil:
			return invalid("cloning volumes is not supported")
		default:
			return invalid("volume_content_source has no source")
		}
	}
	return nil
}

func validateDeleteVolumeRequest(req *csi.DeleteVolumeRequest) error {
	if req.GetVolumeId() == "" {
		return invalid("volume_id is required")
	}
	return nil
}

// validateRequiredCapability is the check of a request's single volume_capability field,
// which ControllerPublishVolume, NodeStageVolume and NodePublishVolume require (CSI spec, each
// RPC's "REQUIRED" field).
func validateRequiredCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return invalid("volume_capability is required")
	}
	if p := capabilityProblem(c); p != "" {
		return invalid("%s", p)
	}
	return nil
}

func validateControllerPublishVolumeRequest(req *csi.ControllerPublishVolumeRequest) error {
	if req.GetVolumeId() == "" {
		return invalid("volume_id is required")
	}
	if req.GetNodeId() == "" {
		return invalid("node_id is required")
	}
	return validateRequiredCapability(req.GetVolumeCapability())
}

func validateControllerUnpublishVolumeRequest(req *csi.ControllerUnpublishVolumeRequest) error {
	if req.GetVolumeId() == "" {
		return invalid("volume_id is required")
	}
	return nil
}

func validateValidateVolumeCapabilitiesRequest(req *csi.ValidateVolumeCapabilitiesRequest) error {
	if req.GetVolumeId() == "" {
		return invalid("volume_id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return invalid("volume_capabilities is required")
	}
	for _, c := range req.GetVolumeCapabilities() {
		if c == nil || (c.GetBlock() == nil && c.GetMount() == nil) || c.GetAccessMode() == nil {
			return invalid("every volume capability needs an access type and an access mode")
		}
	}
	return nil
}

func validateListVolumesRequest(req *csi.ListVolumesRequest) error {
	if req.GetMaxEntries() < 0 {
		return invalid("max_entries must not be negative")
	}
	return nil
}

func validateControllerGetVolumeRequest(req *csi.ControllerGetVolumeRequest) error {
	if req.GetVolumeId() == "" {
		return invalid("volume_id is required")
	}
	return nil
}

func validateCreateSnapshotRequest(req *csi.CreateSnapshotRequest) error {
	if req.GetName() == "" {
		return invalid("name is required")
	}
	if req.GetSourceVolumeId() == "" {
		return invalid("source_volume_id is required")
	}
	return nil
}

func validateDeleteSnapshotRequest(req *csi.DeleteSnapshotRequest) error {
	if req.GetSnapshotId() == "" {
		return invalid("snapshot_id is required")
	}
	return nil
}

func validateListSnapshotsRequest(req *csi.ListSnapshotsRequest) error {
	if req.GetMaxEntries() < 0 {
		return invalid("max_entries must not be negative")
	}
	return nil
}

func validateControllerExpandVolumeRequest(req *csi.ControllerExpandVolumeRequest) error {
	if req.GetVolumeId() == "" {
		return invalid("volume_id is required")
	}
	if req.GetCapacityRange() == nil {
		return invalid("capacity_range is required")
	}
	if err := validateCapabilityRange(req.GetCapacityRange()); err != nil {
		return err
	}
	if c := req.GetVolumeCapability(); c != nil {
		if p := capabilityProblem(c); p != "" {
			return invalid("%s", p)
		}
	}
	return nil
}

// validateNodeVolumeID checks a volume ID the node turns into a directory name under the
// state directory: it must not be able to escape it.
func validateNodeVolumeID(id string) error {
	switch {
	case id == "":
		return invalid("volume_id is required")
	case len(id) > 128, id == ".", id == "..", strings.ContainsAny(id, "/\\\x00"):
		return invalid("volume_id %q cannot name a volume", id)
	}
	return nil
}

func validatePath(field, p string) error {
	if p == "" {
		return invalid("%s is required", field)
	}
	if !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
		return invalid("%s must be an absolute path", field)
	}
	return nil
}

// requireField checks only presence: a volume_path that does not name a mounted volume is
// NOT_FOUND, not INVALID_ARGUMENT (CSI spec, NodeGetVolumeStats and NodeExpandVolume).
func requireField(field, v string) error {
	if v == "" {
		return invalid("%s is required", field)
	}
	return nil
}

func validateNodeStageVolumeRequest(req *csi.NodeStageVolumeRequest) error {
	if err := validateNodeVolumeID(req.GetVolumeId()); err != nil {
		return err
	}
	if err := validatePath("staging_target_path", req.GetStagingTargetPath()); err != nil {
		return err
	}
	return validateRequiredCapability(req.GetVolumeCapability())
}

func validateNodeUnstageVolumeRequest(req *csi.NodeUnstageVolumeRequest) error {
	if err := validateNodeVolumeID(req.GetVolumeId()); err != nil {
		return err
	}
	return validatePath("staging_target_path", req.GetStagingTargetPath())
}

func validateNodePublishVolumeRequest(req *csi.NodePublishVolumeRequest) error {
	if err := validateNodeVolumeID(req.GetVolumeId()); err != nil {
		return err
	}
	if err := validatePath("staging_target_path", req.GetStagingTargetPath()); err != nil {
		return err
	}
	if err := validatePath("target_path", req.GetTargetPath()); err != nil {
		return err
	}
	return validateRequiredCapability(req.GetVolumeCapability())
}

func validateNodeUnpublishVolumeRequest(req *csi.NodeUnpublishVolumeRequest) error {
	if err := validateNodeVolumeID(req.GetVolumeId()); err != nil {
		return err
	}
	return validatePath("target_path", req.GetTargetPath())
}

func validateNodeGetVolumeStatsRequest(req *csi.NodeGetVolumeStatsRequest) error {
	if err := validateNodeVolumeID(req.GetVolumeId()); err != nil {
		return err
	}
	return requireField("volume_path", req.GetVolumePath())
}

func validateNodeExpandVolumeRequest(req *csi.NodeExpandVolumeRequest) error {
	if err := validateNodeVolumeID(req.GetVolumeId()); err != nil {
		return err
	}
	if err := requireField("volume_path", req.GetVolumePath()); err != nil {
		return err
	}
	if err := validateCapabilityRange(req.GetCapacityRange()); err != nil {
		return err
	}
	if c := req.GetVolumeCapability(); c != nil {
		if p := capabilityProblem(c); p != "" {
			return invalid("%s", p)
		}
	}
	return nil
}
