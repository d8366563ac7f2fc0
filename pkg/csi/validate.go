package csi

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// The validateXRequest functions check the shape of a request before anything else happens and
// return only INVALID_ARGUMENT errors (or nil; ABORTED for a page token, as the spec says), so
// that bad input changes nothing. Every field is bounded before it is used, logged or sent to
// the cloud (CSI spec, "Size Limits"): a string at most 128 bytes (cloud.MaxIDBytes), a
// map<string, string> at most 4 KiB of keys and values, and IDs and names follow the cloud's
// rules (cloud.CheckID, cloud.CheckName), so a value the cloud would refuse never reaches a
// URL. Error messages quote at most a bounded prefix of any value (cloud.Quote).

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// Bounds of request fields beyond the single strings.
const (
	// maxMapBytes is the CSI spec's size limit of a map<string, string>: keys and values
	// together.
	maxMapBytes = 4 << 10
	// maxRepeated bounds a repeated field (capabilities, topologies, mount flags). The spec
	// sets none; a CO sends a handful, a topology list one entry per zone.
	maxRepeated = 1024
)

// checkID is cloud.CheckID as INVALID_ARGUMENT: a required ID, bounded and free of control
// characters, "." and "..".
func checkID(field, v string) error {
	if v == "" {
		return invalid("%s is required", field)
	}
	if err := cloud.CheckID(field, v); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// checkOptionalID is checkID for a field that may be empty.
func checkOptionalID(field, v string) error {
	if v == "" {
		return nil
	}
	return checkID(field, v)
}

// checkName is cloud.CheckName as INVALID_ARGUMENT (CreateVolume and CreateSnapshot names).
func checkName(field, v string) error {
	if v == "" {
		return invalid("%s is required", field)
	}
	if err := cloud.CheckName(field, v); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// checkString bounds an optional free-form string (fs_type, a mount flag) to 128 bytes.
func checkString(field, v string) error {
	if len(v) > cloud.MaxIDBytes {
		return invalid("%s is %d bytes long, at most %d allowed", field, len(v), cloud.MaxIDBytes)
	}
	return nil
}

// checkMap bounds a map<string, string> to the spec's 4 KiB of keys and values.
func checkMap(field string, m map[string]string) error {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	if n > maxMapBytes {
		return invalid("%s holds %d bytes of keys and values, at most %d allowed", field, n, maxMapBytes)
	}
	return nil
}

// checkCount bounds a repeated field.
func checkCount(field string, n int) error {
	if n > maxRepeated {
		return invalid("%s has %d entries, at most %d allowed", field, n, maxRepeated)
	}
	return nil
}

// checkPageToken bounds a starting_token; the spec answers an invalid one with ABORTED
// (ListVolumes, ListSnapshots).
func checkPageToken(v string) error {
	if err := cloud.CheckOptionalID("starting_token", v); err != nil {
		return status.Errorf(codes.Aborted, "%v", err)
	}
	return nil
}

// firstError returns the first non-nil error.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// capabilityBounds bounds the strings of a capability (fs_type, mount flags,
// volume_mount_group); capabilityProblem judges what it asks for.
func capabilityBounds(c *csi.VolumeCapability) error {
	m := c.GetMount()
	if m == nil {
		return nil
	}
	errs := []error{checkString("fs_type", m.GetFsType()), checkString("volume_mount_group", m.GetVolumeMountGroup()),
		checkCount("mount_flags", len(m.GetMountFlags()))}
	for _, f := range m.GetMountFlags() {
		errs = append(errs, checkString("mount flag", f))
	}
	return firstError(errs...)
}

// checkTopologies bounds a list of topologies: count and each segment map.
func checkTopologies(field string, ts []*csi.Topology) error {
	if err := checkCount(field, len(ts)); err != nil {
		return err
	}
	for _, t := range ts {
		if err := checkMap(field+" segments", t.GetSegments()); err != nil {
			return err
		}
	}
	return nil
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
	if err := checkCount("volume_capabilities", len(caps)); err != nil {
		return err
	}
	for _, c := range caps {
		if p := capabilityProblem(c); p != "" {
			return invalid("%s", p)
		}
		if err := capabilityBounds(c); err != nil {
			return err
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
	if err := checkName("name", req.GetName()); err != nil {
		return err
	}
	if err := validateCapabilities(req.GetVolumeCapabilities()); err != nil {
		return err
	}
	if err := validateCapabilityRange(req.GetCapacityRange()); err != nil {
		return err
	}
	ar := req.GetAccessibilityRequirements()
	if err := firstError(checkMap("parameters", req.GetParameters()), checkMap("secrets", req.GetSecrets()),
		checkMap("mutable_parameters", req.GetMutableParameters()),
		checkTopologies("accessibility_requirements.requisite", ar.GetRequisite()),
		checkTopologies("accessibility_requirements.preferred", ar.GetPreferred())); err != nil {
		return err
	}
	if src := req.GetVolumeContentSource(); src != nil {
		switch {
		case src.GetSnapshot() != nil:
			if err := checkID("volume_content_source.snapshot.snapshot_id", src.GetSnapshot().GetSnapshotId()); err != nil {
				return err
			}
		case src.GetVolume() != nil:
			if err := checkID("volume_content_source.volume.volume_id", src.GetVolume().GetVolumeId()); err != nil {
				return err
			}
		default:
			return invalid("volume_content_source has no source")
		}
	}
	return nil
}

func validateDeleteVolumeRequest(req *csi.DeleteVolumeRequest) error {
	return firstError(checkID("volume_id", req.GetVolumeId()), checkMap("secrets", req.GetSecrets()))
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
	return capabilityBounds(c)
}

// validateControllerPublishVolumeRequest: a volume_id or node_id that is not an identifier
// (over 128 bytes, a control character, "." or "..") is INVALID_ARGUMENT, before it reaches
// the cloud; a well-formed one the cloud does not know is NOT_FOUND from the cloud (CSI spec,
// ControllerPublishVolume errors).
func validateControllerPublishVolumeRequest(req *csi.ControllerPublishVolumeRequest) error {
	if err := firstError(checkID("volume_id", req.GetVolumeId()), checkID("node_id", req.GetNodeId()),
		checkMap("secrets", req.GetSecrets()), checkMap("volume_context", req.GetVolumeContext())); err != nil {
		return err
	}
	return validateRequiredCapability(req.GetVolumeCapability())
}

func validateControllerUnpublishVolumeRequest(req *csi.ControllerUnpublishVolumeRequest) error {
	return firstError(checkID("volume_id", req.GetVolumeId()), checkOptionalID("node_id", req.GetNodeId()),
		checkMap("secrets", req.GetSecrets()))
}

func validateValidateVolumeCapabilitiesRequest(req *csi.ValidateVolumeCapabilitiesRequest) error {
	if err := checkID("volume_id", req.GetVolumeId()); err != nil {
		return err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return invalid("volume_capabilities is required")
	}
	if err := firstError(checkCount("volume_capabilities", len(req.GetVolumeCapabilities())),
		checkMap("volume_context", req.GetVolumeContext()), checkMap("parameters", req.GetParameters()),
		checkMap("mutable_parameters", req.GetMutableParameters()), checkMap("secrets", req.GetSecrets())); err != nil {
		return err
	}
	for _, c := range req.GetVolumeCapabilities() {
		if c == nil || (c.GetBlock() == nil && c.GetMount() == nil) || c.GetAccessMode() == nil {
			return invalid("every volume capability needs an access type and an access mode")
		}
		if err := capabilityBounds(c); err != nil {
			return err
		}
	}
	return nil
}

func validateListVolumesRequest(req *csi.ListVolumesRequest) error {
	if req.GetMaxEntries() < 0 {
		return invalid("max_entries must not be negative")
	}
	return checkPageToken(req.GetStartingToken())
}

func validateControllerGetVolumeRequest(req *csi.ControllerGetVolumeRequest) error {
	return checkID("volume_id", req.GetVolumeId())
}

func validateGetCapacityRequest(req *csi.GetCapacityRequest) error {
	if err := firstError(checkCount("volume_capabilities", len(req.GetVolumeCapabilities())),
		checkMap("parameters", req.GetParameters())); err != nil {
		return err
	}
	if t := req.GetAccessibleTopology(); t != nil {
		if err := checkMap("accessible_topology segments", t.GetSegments()); err != nil {
			return err
		}
	}
	for _, c := range req.GetVolumeCapabilities() {
		if err := capabilityBounds(c); err != nil {
			return err
		}
	}
	return nil
}

func validateCreateSnapshotRequest(req *csi.CreateSnapshotRequest) error {
	return firstError(checkName("name", req.GetName()), checkID("source_volume_id", req.GetSourceVolumeId()),
		checkMap("parameters", req.GetParameters()), checkMap("secrets", req.GetSecrets()))
}

func validateGetSnapshotRequest(req *csi.GetSnapshotRequest) error {
	return firstError(checkID("snapshot_id", req.GetSnapshotId()), checkMap("secrets", req.GetSecrets()))
}

func validateDeleteSnapshotRequest(req *csi.DeleteSnapshotRequest) error {
	return firstError(checkID("snapshot_id", req.GetSnapshotId()), checkMap("secrets", req.GetSecrets()))
}

// validateCreateVolumeGroupSnapshotRequest: a name, 1 to cloud.MaxGroupSnapshotMembers
// source volume IDs, none twice, and bounded maps.
func validateCreateVolumeGroupSnapshotRequest(req *csi.CreateVolumeGroupSnapshotRequest) error {
	if err := firstError(checkName("name", req.GetName()), checkMap("parameters", req.GetParameters()),
		checkMap("secrets", req.GetSecrets())); err != nil {
		return err
	}
	ids := req.GetSourceVolumeIds()
	switch {
	case len(ids) == 0:
		return invalid("source_volume_ids is required")
	case len(ids) > cloud.MaxGroupSnapshotMembers:
		return invalid("source_volume_ids has %d volumes, at most %d allowed", len(ids), cloud.MaxGroupSnapshotMembers)
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := checkID("source_volume_ids[]", id); err != nil {
			return err
		}
		if seen[id] {
			return invalid("source_volume_ids lists %s more than once", cloud.Quote(id))
		}
		seen[id] = true
	}
	return nil
}

// checkSnapshotIDs bounds the snapshot_ids of a group snapshot request: at most
// cloud.MaxGroupSnapshotMembers identifiers (none is allowed: csi-sanity sends none).
func checkSnapshotIDs(ids []string) error {
	if len(ids) > cloud.MaxGroupSnapshotMembers {
		return invalid("snapshot_ids has %d entries, a group has at most %d", len(ids), cloud.MaxGroupSnapshotMembers)
	}
	for _, id := range ids {
		if err := checkID("snapshot_ids[]", id); err != nil {
			return err
		}
	}
	return nil
}

func validateGetVolumeGroupSnapshotRequest(req *csi.GetVolumeGroupSnapshotRequest) error {
	return firstError(checkID("group_snapshot_id", req.GetGroupSnapshotId()), checkSnapshotIDs(req.GetSnapshotIds()),
		checkMap("secrets", req.GetSecrets()))
}

func validateDeleteVolumeGroupSnapshotRequest(req *csi.DeleteVolumeGroupSnapshotRequest) error {
	return firstError(checkID("group_snapshot_id", req.GetGroupSnapshotId()), checkSnapshotIDs(req.GetSnapshotIds()),
		checkMap("secrets", req.GetSecrets()))
}

// validateListSnapshotsRequest: snapshot_id and source_volume_id are filters, so one that is
// not an identifier is INVALID_ARGUMENT (it could never match); a bad starting_token is
// ABORTED.
func validateListSnapshotsRequest(req *csi.ListSnapshotsRequest) error {
	if req.GetMaxEntries() < 0 {
		return invalid("max_entries must not be negative")
	}
	return firstError(checkOptionalID("snapshot_id", req.GetSnapshotId()), checkOptionalID("source_volume_id", req.GetSourceVolumeId()),
		checkMap("secrets", req.GetSecrets()), checkPageToken(req.GetStartingToken()))
}

// The mutable parameter keys (MODIFY_VOLUME: VolumeAttributesClass parameters and
// CreateVolume's mutable_parameters).
const (
	MutableParameterType = "type"
	MutableParameterIOPS = "iops"
)

// parseMutableParameters turns mutable_parameters into the cloud's request: "type" (one of
// cloud.VolumeTypes) and "iops" (a whole number, 0 or cloud.MinIOPS to cloud.MaxIOPS). Any
// other key or a malformed value is INVALID_ARGUMENT (CSI spec, ControllerModifyVolume).
func parseMutableParameters(field string, m map[string]string) (cloud.ModifyVolumeRequest, error) {
	var out cloud.ModifyVolumeRequest
	if err := checkMap(field, m); err != nil {
		return out, err
	}
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case MutableParameterType:
			out.Type = &v
		case MutableParameterIOPS:
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s %s is not a whole number", k, cloud.Quote(v)))
				continue
			}
			out.IOPS = &n
		default:
			errs = append(errs, fmt.Sprintf("unknown key %s (mutable parameters: %s, %s)", cloud.Quote(k), MutableParameterType, MutableParameterIOPS))
		}
	}
	// Each value on its own; whether they fit the volume's other parameter (iops on a
	// standard volume) is the cloud's check, also INVALID_ARGUMENT.
	if out.Type != nil {
		if err := cloud.CheckVolumeParameters(*out.Type, 0); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if out.IOPS != nil {
		if err := cloud.CheckVolumeParameters(cloud.VolumeTypeSSD, *out.IOPS); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return out, invalid("%s: %s", field, strings.Join(errs, "; "))
	}
	return out, nil
}

func validateControllerModifyVolumeRequest(req *csi.ControllerModifyVolumeRequest) (cloud.ModifyVolumeRequest, error) {
	if err := firstError(checkID("volume_id", req.GetVolumeId()), checkMap("secrets", req.GetSecrets())); err != nil {
		return cloud.ModifyVolumeRequest{}, err
	}
	return parseMutableParameters("mutable_parameters", req.GetMutableParameters())
}

func validateControllerExpandVolumeRequest(req *csi.ControllerExpandVolumeRequest) error {
	if err := firstError(checkID("volume_id", req.GetVolumeId()), checkMap("secrets", req.GetSecrets())); err != nil {
		return err
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
		return capabilityBounds(c)
	}
	return nil
}

// validateNodeVolumeID checks a volume ID the node turns into a directory name under the
// state directory: cloud.CheckID (1-128 bytes, UTF-8, no control character, not "." or
// "..", the controller's rule), and cloud-shaped: ASCII letters, digits, '-', '_', '.' and
// ':' only, starting with a letter or a digit. So it cannot escape that directory (no "/")
// nor name one of the node's own folders there (".snapshots", ".clone" leftovers).
func validateNodeVolumeID(id string) error {
	if err := checkID("volume_id", id); err != nil {
		return err
	}
	if strings.ContainsAny(id, "/\\") {
		return invalid("volume_id %s cannot name a volume: it holds a path separator", cloud.Quote(id))
	}
	if c := id[0]; !isASCIIAlnum(c) {
		return invalid("volume_id %s cannot name a volume: it must start with a letter or a digit", cloud.Quote(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isASCIIAlnum(c) && c != '-' && c != '_' && c != '.' && c != ':' {
			return invalid("volume_id %s cannot name a volume: byte %d is not a letter, a digit, '-', '_', '.' or ':'", cloud.Quote(id), i)
		}
	}
	return nil
}

// cloudVolumeIDPrefix starts every volume ID the cloud makes: "vol-" and a fixed-width hex
// counter (pkg/cloud/server/store, nextID); the cloud's IDs never hold '.' or ':'.
const cloudVolumeIDPrefix = "vol-"

// checkCloudVolumeShape answers NOT_FOUND (CSI spec, node RPC errors: "Volume does not
// exist") for a well-formed volume_id that cannot be one of the cloud's volumes: not
// "vol-" followed by letters, digits, '-' or '_' (so never a snapshot's "snap-…", never
// "<id>.clone", the temporary folder of a clone's seed). It runs after every
// INVALID_ARGUMENT check of the request (csi-sanity sends IDs like "fake-vol-id-…" and
// expects NOT_FOUND once the request is otherwise valid).
func checkCloudVolumeShape(id string) error {
	rest, ok := strings.CutPrefix(id, cloudVolumeIDPrefix)
	bad := !ok || rest == ""
	for i := 0; !bad && i < len(rest); i++ {
		c := rest[i]
		bad = !isASCIIAlnum(c) && c != '-' && c != '_'
	}
	if bad {
		return status.Errorf(codes.NotFound, "volume %s does not exist: the cloud's volume IDs are %s followed by letters, digits, '-' or '_'", cloud.Quote(id), cloudVolumeIDPrefix)
	}
	return nil
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Bounds of the node's paths. The spec lets staging_target_path, target_path and volume_path
// pass its 128-byte string limit, asking for the OS's maximum.
const (
	// maxPathBytes is Linux's PATH_MAX (4096) less its terminating NUL.
	maxPathBytes = 4095
	// maxStagingPathBytes leaves room for "/block", the file a block volume is staged on,
	// so that every path the node makes stays within maxPathBytes.
	maxStagingPathBytes = maxPathBytes - len("/"+stagedBlockFile)
	// maxPathElemBytes is NAME_MAX, the longest element of a path.
	maxPathElemBytes = 255
)

// checkPathBounds bounds a path field: at most max bytes, elements at most NAME_MAX, no
// control character (NUL included). It does not judge where the path points.
func checkPathBounds(field, p string, max int) error {
	if len(p) > max {
		return invalid("%s is %d bytes long, at most %d allowed", field, len(p), max)
	}
	for i, r := range p {
		if unicode.IsControl(r) {
			return invalid("%s has the control character %U at byte %d", field, r, i)
		}
	}
	for _, e := range strings.Split(p, "/") {
		if len(e) > maxPathElemBytes {
			return invalid("%s has a %d-byte element, at most %d allowed", field, len(e), maxPathElemBytes)
		}
	}
	return nil
}

// pathInside reports why p is not a clean absolute path strictly inside root (itself clean,
// absolute and not "/"), or "" when it is. Clean means filepath.Clean(p) == p, so "..", "."
// and "//" never pass. The test is on the text, the first gate only: the calls then reach
// the path through mount.Root, which follows no link below the root.
func pathInside(p, root string) string {
	switch {
	case !filepath.IsAbs(p):
		return "is not an absolute path"
	case filepath.Clean(p) != p:
		return "is not a clean path (no \"..\", \".\", \"//\" or trailing \"/\")"
	case !strings.HasPrefix(p, root+"/"):
		return fmt.Sprintf("is not inside the kubelet root %s (--kubelet-root)", root)
	}
	return ""
}

// checkNodePath is the check of a path the node creates or mounts (staging_target_path,
// target_path): required, bounded (checkPathBounds) and inside the kubelet root
// (pathInside); INVALID_ARGUMENT otherwise, before anything is touched.
func checkNodePath(field, p, root string, max int) error {
	if p == "" {
		return invalid("%s is required", field)
	}
	if err := checkPathBounds(field, p, max); err != nil {
		return err
	}
	if why := pathInside(p, root); why != "" {
		return invalid("%s %s %s", field, cloud.Quote(p), why)
	}
	return nil
}

// checkVolumePath bounds the volume_path of NodeGetVolumeStats and NodeExpandVolume: required
// and bounded, else INVALID_ARGUMENT. Where it points is judged by the call: a path that
// holds no volume of this node is NOT_FOUND (CSI spec, both RPCs' error tables).
func checkVolumePath(p string) error {
	if p == "" {
		return invalid("volume_path is required")
	}
	return checkPathBounds("volume_path", p, maxPathBytes)
}

// checkOptionalStagingPath bounds an optional staging_target_path (NodeGetVolumeStats,
// NodeExpandVolume), which the node only reads.
func checkOptionalStagingPath(p string) error {
	return checkPathBounds("staging_target_path", p, maxStagingPathBytes)
}

func validateNodeStageVolumeRequest(req *csi.NodeStageVolumeRequest, root string) error {
	return firstError(validateNodeVolumeID(req.GetVolumeId()),
		checkNodePath("staging_target_path", req.GetStagingTargetPath(), root, maxStagingPathBytes),
		checkMap("publish_context", req.GetPublishContext()), checkMap("secrets", req.GetSecrets()),
		checkMap("volume_context", req.GetVolumeContext()),
		validateRequiredCapability(req.GetVolumeCapability()))
}

func validateNodeUnstageVolumeRequest(req *csi.NodeUnstageVolumeRequest, root string) error {
	return firstError(validateNodeVolumeID(req.GetVolumeId()),
		checkNodePath("staging_target_path", req.GetStagingTargetPath(), root, maxStagingPathBytes),
		checkCloudVolumeShape(req.GetVolumeId()))
}

func validateNodePublishVolumeRequest(req *csi.NodePublishVolumeRequest, root string) error {
	return firstError(validateNodeVolumeID(req.GetVolumeId()),
		checkNodePath("staging_target_path", req.GetStagingTargetPath(), root, maxStagingPathBytes),
		checkNodePath("target_path", req.GetTargetPath(), root, maxPathBytes),
		checkMap("publish_context", req.GetPublishContext()), checkMap("secrets", req.GetSecrets()),
		checkMap("volume_context", req.GetVolumeContext()),
		validateRequiredCapability(req.GetVolumeCapability()), checkCloudVolumeShape(req.GetVolumeId()))
}

func validateNodeUnpublishVolumeRequest(req *csi.NodeUnpublishVolumeRequest, root string) error {
	return firstError(validateNodeVolumeID(req.GetVolumeId()),
		checkNodePath("target_path", req.GetTargetPath(), root, maxPathBytes),
		checkCloudVolumeShape(req.GetVolumeId()))
}

func validateNodeGetVolumeStatsRequest(req *csi.NodeGetVolumeStatsRequest) error {
	return firstError(validateNodeVolumeID(req.GetVolumeId()), checkVolumePath(req.GetVolumePath()),
		checkOptionalStagingPath(req.GetStagingTargetPath()), checkCloudVolumeShape(req.GetVolumeId()))
}

func validateNodeExpandVolumeRequest(req *csi.NodeExpandVolumeRequest) error {
	if err := firstError(validateNodeVolumeID(req.GetVolumeId()), checkVolumePath(req.GetVolumePath()),
		checkOptionalStagingPath(req.GetStagingTargetPath()), checkMap("secrets", req.GetSecrets()),
		validateCapabilityRange(req.GetCapacityRange())); err != nil {
		return err
	}
	if c := req.GetVolumeCapability(); c != nil {
		if p := capabilityProblem(c); p != "" {
			return invalid("%s", p)
		}
		if err := capabilityBounds(c); err != nil {
			return err
		}
	}
	return checkCloudVolumeShape(req.GetVolumeId())
}
