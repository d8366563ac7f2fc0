package csi

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
)

const (
	// DriverName is the CSI driver name (GetPluginInfo.name, CSIDriver object name).
	DriverName = "disk.fakecloud.dev"
	// TopologyZoneKey is the topology segment key carrying a cloud zone, in NodeGetInfo and
	// in volumes' accessible_topology.
	TopologyZoneKey = "topology.disk.fakecloud.dev/zone"
	// PublishContextDevicePath is the publish_context key of ControllerPublishVolume's answer:
	// the device the cloud attached the volume as.
	PublishContextDevicePath = "devicePath"
	// PublishContextReadOnly is the publish_context key ControllerPublishVolume sets to
	// "true" when the cloud attached the volume read-only (PUBLISH_READONLY); the node then
	// publishes it read-only whatever NodePublishVolume's own readonly says.
	PublishContextReadOnly = "readOnly"
	// VolumeContextSizeBytes is the volume_context key holding the size, in bytes, the volume
	// was created with; the node sizes a block volume's backing file from it.
	VolumeContextSizeBytes = "sizeBytes"
	// VolumeContextSourceVolume is the volume_context key of a clone (CLONE_VOLUME): the ID
	// of its source volume, whose backing data the node copies when it first stages the clone.
	VolumeContextSourceVolume = "sourceVolumeId"
	// VolumeContextSourceSnapshot is the volume_context key of a volume restored from a
	// snapshot: the snapshot's ID, whose data (kept by the controller, snapshotdata.go) the
	// node copies when it first stages the volume.
	VolumeContextSourceSnapshot = "sourceSnapshotId"

	// GiB is a gibibyte; volume sizes are whole GiB.
	GiB int64 = 1 << 30
	// DefaultVolumeSize is the size of a volume created without required_bytes, in bytes.
	DefaultVolumeSize = GiB
	// MaxVolumeSize is the largest volume this driver creates or expands to, in bytes.
	MaxVolumeSize int64 = 16 << 40
)

// ControllerServer is the CSI controller service: volumes, attachments and snapshots, all
// through the cloud (CSI spec, "Controller Service RPC"). Every error it returns is a gRPC
// status error; cloud errors are mapped once per RPC by cloudStatus.
type ControllerServer struct {
	csi.UnimplementedControllerServer
	cloud    ControllerCloud
	inflight *inflight
	// backoff answers a publish to a node known to be full, or a volume whose attach just
	// failed transiently, without asking the cloud; nil: every publish asks the cloud.
	backoff *backoff.Backoff
	// cloudOK is called after every successful cloud call; it makes Probe ready.
	cloudOK func()
	// metrics counts publish and unpublish outcomes; nil: not counted (set by New).
	metrics *controllerMetrics
	// snapData keeps each snapshot's data for the volumes restored from it; the zero value
	// keeps none (set by New from --volume-data-dir).
	snapData snapshotData
	// noWait is set once the cloud answered a wait without waiting (an older fake cloud):
	// publish and unpublish then poll (waitTransition).
	noWait atomic.Bool
}

var _ csi.ControllerServer = (*ControllerServer)(nil)

// NewControllerServer returns a controller service using c. bo remembers publish failures
// (nil: none are remembered). cloudOK, if not nil, is called whenever a cloud call
// succeeded (readiness).
func NewControllerServer(c ControllerCloud, bo *backoff.Backoff, cloudOK func()) *ControllerServer {
	if cloudOK == nil {
		cloudOK = func() {}
	}
	return &ControllerServer{cloud: c, inflight: newInflight(), backoff: bo, cloudOK: cloudOK}
}

// ok passes err through and reports a successful cloud call when err is nil.
func (s *ControllerServer) ok(err error) error {
	if err == nil {
		s.cloudOK()
	}
	return err
}

// cleanupTimeout bounds the cloud call that undoes a half-done create (a snapshot whose data
// could not be copied), made even when the RPC's own context has ended.
const cleanupTimeout = 30 * time.Second

// undoCreate deletes, with del, the cloud object (kind "snapshot" or "group snapshot", ID id)
// a create made before its data capture failed with err (a gRPC status error), so that an
// object whose ID was never returned is not left behind. del gets its own cleanupTimeout
// deadline, unaffected by the caller's cancellation. It returns err, or, when the delete
// failed too (an object already gone counts as deleted), err's code with both messages: the
// object then stays until the CO's retry of the same name (the cloud returns it by name)
// copies or deletes it.
func undoCreate(ctx context.Context, err error, kind, id string, del func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if derr := del(dctx); cloudCode(opGone, derr) != codes.OK {
		logger.Error(derr, "Object whose data could not be copied is not deleted", "kind", kind, "id", id)
		return status.Errorf(status.Code(err), "%s (and %s %s could not be deleted: %v)", status.Convert(err).Message(), kind, id, derr)
	}
	logger.V(2).Info("Object whose data could not be copied deleted", "kind", kind, "id", id, "err", err)
	return err
}

func aborted(key string) error {
	return status.Errorf(codes.Aborted, "an operation on %s is already in progress", key)
}

func roundUpGiB(b int64) int64 { return (b + GiB - 1) / GiB * GiB }

// volumeSize turns a capacity range into a whole-GiB size. atLeast is the smallest size the
// content needs (a source snapshot's size), 0 if none. Sizes the range cannot satisfy are
// OUT_OF_RANGE (CSI spec, CreateVolume and ControllerExpandVolume errors).
func volumeSize(r *csi.CapacityRange, atLeast int64) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if lim > 0 && req > lim {
		return 0, status.Errorf(codes.OutOfRange, "required_bytes %d exceeds limit_bytes %d", req, lim)
	}
	if req > 0 && req < atLeast {
		return 0, status.Errorf(codes.OutOfRange, "required_bytes %d is smaller than the source (%d bytes)", req, atLeast)
	}
	size := req
	if size == 0 {
		size = max(DefaultVolumeSize, atLeast)
	}
	if size > MaxVolumeSize {
		return 0, status.Errorf(codes.OutOfRange, "%d bytes exceeds the maximum volume size %d", size, MaxVolumeSize)
	}
	size = roundUpGiB(size)
	if lim > 0 && size > lim {
		if req == 0 {
			// No minimum asked for: the largest whole GiB under the limit will do.
			size = lim / GiB * GiB
		}
		if size == 0 || size > lim || size < atLeast {
			return 0, status.Errorf(codes.OutOfRange, "no whole-GiB size fits limit_bytes %d", lim)
		}
	}
	return size, nil
}

// zoneFor picks the zone for a new volume: the first preferred topology with a zone, then the
// first requisite one; "" lets the cloud choose.
func zoneFor(req *csi.TopologyRequirement) string {
	for _, list := range [][]*csi.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range list {
			if z := t.GetSegments()[TopologyZoneKey]; z != "" {
				return z
			}
		}
	}
	return ""
}

// topologyAllows reports whether a volume in zone meets req: no requisite topology, or one
// with that zone (or without a zone segment).
func topologyAllows(req *csi.TopologyRequirement, zone string) bool {
	if len(req.GetRequisite()) == 0 {
		return true
	}
	for _, t := range req.GetRequisite() {
		if z, ok := t.GetSegments()[TopologyZoneKey]; !ok || z == zone {
			return true
		}
	}
	return false
}

func topologyOf(zone string) []*csi.Topology {
	if zone == "" {
		return nil
	}
	return []*csi.Topology{{Segments: map[string]string{TopologyZoneKey: zone}}}
}

func csiVolume(v *cloud.Volume) *csi.Volume {
	out := &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.SizeBytes,
		VolumeContext:      map[string]string{VolumeContextSizeBytes: strconv.FormatInt(v.SizeBytes, 10)},
		AccessibleTopology: topologyOf(v.Zone),
	}
	if v.SourceSnapshotID != "" {
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshotID},
		}}
		out.VolumeContext[VolumeContextSourceSnapshot] = v.SourceSnapshotID
	}
	if v.SourceVolumeID != "" {
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceVolumeID},
		}}
		out.VolumeContext[VolumeContextSourceVolume] = v.SourceVolumeID
	}
	return out
}

func publishedNodes(v *cloud.Volume) []string {
	if v.AttachedTo == "" {
		return nil
	}
	return []string{v.AttachedTo}
}

// CreateVolume creates a volume in the cloud, idempotent by name (the cloud's idempotency key):
// the same name and parameters return the same volume, other parameters ALREADY_EXISTS. The
// size is capacity_range rounded up to whole GiB (OUT_OF_RANGE when the range cannot be met);
// the zone comes from accessibility_requirements (preferred first, then requisite). A missing
// source snapshot or volume is NOT_FOUND; only the cloud's volume and capacity quotas are
// RESOURCE_EXHAUSTED. A clone (CLONE_VOLUME) is in its source's zone, which the requisite
// topology must allow (else INVALID_ARGUMENT), and at least its size (OUT_OF_RANGE).
func (s *ControllerServer) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := validateCreateVolumeRequest(req); err != nil {
		return nil, err
	}
	mutable, err := parseMutableParameters("mutable_parameters", req.GetMutableParameters())
	if err != nil {
		return nil, err
	}
	if mutable.IOPS != nil && *mutable.IOPS != 0 && mutable.Type == nil {
		// A new volume is standard, which takes no IOPS: refused before anything is made.
		return nil, status.Errorf(codes.InvalidArgument, "mutable_parameters: %s needs a %s that takes it (%s or %s)",
			MutableParameterIOPS, MutableParameterType, cloud.VolumeTypeSSD, cloud.VolumeTypeNVMe)
	}
	if mutable.Type != nil && mutable.IOPS != nil {
		if err := cloud.CheckVolumeParameters(*mutable.Type, *mutable.IOPS); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "mutable_parameters: %v", err)
		}
	}
	key := "create/" + req.GetName()
	if !s.inflight.tryAcquire(key) {
		return nil, aborted(req.GetName())
	}
	defer s.inflight.release(key)

	var atLeast int64
	snapID := req.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
	if snapID != "" {
		snap, err := s.cloud.GetSnapshot(ctx, snapID)
		if err := s.ok(err); err != nil {
			return nil, cloudStatus(opDefault, err, "get source snapshot %s", snapID)
		}
		atLeast = snap.SizeBytes
	}
	zone := zoneFor(req.GetAccessibilityRequirements())
	srcID := req.GetVolumeContentSource().GetVolume().GetVolumeId()
	if srcID != "" {
		src, err := s.cloud.GetVolume(ctx, srcID)
		if err := s.ok(err); err != nil {
			return nil, cloudStatus(opDefault, err, "get source volume %s", srcID)
		}
		if !topologyAllows(req.GetAccessibilityRequirements(), src.Zone) {
			return nil, status.Errorf(codes.InvalidArgument, "source volume %s is in zone %s, which accessibility_requirements.requisite does not allow; a clone is in its source's zone", srcID, src.Zone)
		}
		zone, atLeast = src.Zone, src.SizeBytes
	}
	size, err := volumeSize(req.GetCapacityRange(), atLeast)
	if err != nil {
		return nil, err
	}
	v, err := s.cloud.CreateVolume(ctx, cloud.CreateVolumeRequest{
		Name: req.GetName(), SizeBytes: size, Zone: zone, SourceSnapshotID: snapID, SourceVolumeID: srcID,
	})
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "create volume %s", req.GetName())
	}
	if mod := mutable; mod.Type != nil || mod.IOPS != nil {
		// The cloud creates volumes standard; the VolumeAttributesClass's parameters are a
		// modify right after, idempotent like the create (a retry applies the same values).
		v, err = s.cloud.ModifyVolume(ctx, v.ID, mod)
		if err := s.ok(err); err != nil {
			return nil, cloudStatus(opDefault, err, "apply mutable_parameters to volume %s", req.GetName())
		}
	}
	klog.FromContext(ctx).V(2).Info("Volume created", "volumeID", v.ID, "name", v.Name, "sizeBytes", v.SizeBytes, "zone", v.Zone)
	return &csi.CreateVolumeResponse{Volume: csiVolume(v)}, nil
}

// DeleteVolume deletes a volume; a volume that does not exist is success. A volume still
// attached is FAILED_PRECONDITION (the cloud's VolumeInUse).
func (s *ControllerServer) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := validateDeleteVolumeRequest(req); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if !s.inflight.tryAcquire(id) {
		return nil, aborted(id)
	}
	defer s.inflight.release(id)
	if err := cloudStatus(opGone, s.ok(s.cloud.DeleteVolume(ctx, id)), "delete volume %s", id); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Volume deleted", "volumeID", id)
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerPublishVolume attaches the volume to the node's instance (node ID = instance ID).
// The cloud checks slots, quota, zone and single attachment atomically, so this call — not the
// CSINode count — is the authority (docs/design.md, rule 1). Codes: RESOURCE_EXHAUSTED only for a
// full node or attachment quota; FAILED_PRECONDITION for a zone mismatch or a volume attached
// elsewhere; NOT_FOUND for a missing volume or node; ABORTED while another operation on the
// same volume runs in this process or the cloud is detaching it from the node.
// publish_context carries {"devicePath": device}, the same for every publish of the volume.
// PUBLISH_READONLY: readonly (or the SINGLE_NODE_READER_ONLY access mode) attaches read-only
// and adds {"readOnly": "true"}, which the node obeys; a publish to the same node in the
// other mode is ALREADY_EXISTS (CSI's "volume published but is incompatible").
//
// The cloud attaches asynchronously (docs/attach.md): the call starts the attach and waits
// for attached within its own deadline. A retry for the same (volume, node) while one waits
// joins it, in this process and in the cloud (never a second attach). When the deadline comes
// first the answer is DEADLINE_EXCEEDED (the external-attacher retries; the cloud goes on) and
// the next call returns OK once attached. An attach the cloud ends in error is answered with
// the code of its failure.
//
// After a RESOURCE_EXHAUSTED from the cloud, further publishes to that node are answered
// RESOURCE_EXHAUSTED without the cloud until a backoff window ends or a volume is unpublished
// from the node; after UNAVAILABLE, INTERNAL or DEADLINE_EXCEEDED the same volume and node
// get the remembered code for a shorter window (package backoff). A volume already attached
// to the node is never refused by a window: it still gets its idempotent OK. An attach that
// is merely still under way is not remembered: its retry must be able to join it.
func (s *ControllerServer) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (_ *csi.ControllerPublishVolumeResponse, err error) {
	class := classNotAsked
	defer func() { s.metrics.observe(opPublish, err, class) }()
	if err := validateControllerPublishVolumeRequest(req); err != nil {
		return nil, err
	}
	volID, nodeID := req.GetVolumeId(), req.GetNodeId()
	if !s.inflight.tryJoin(volID, "publish/"+nodeID) {
		return nil, aborted(volID)
	}
	defer s.inflight.release(volID)
	if class, err = s.checkBackoff(ctx, volID, nodeID); err != nil {
		return nil, err
	}
	// PUBLISH_READONLY: the attachment's mode is the cloud's, part of the attachment; the
	// same volume and node in the other mode is ALREADY_EXISTS (the cloud's AlreadyExists).
	ro := isReadOnly(req.GetVolumeCapability(), req.GetReadonly())
	att, err := s.cloud.Attach(ctx, volID, cloud.AttachRequest{InstanceID: nodeID, ReadOnly: ro})
	class = cloudClass(err)
	if err := s.ok(err); err != nil {
		mode := ""
		if ro {
			mode = " read-only"
		}
		st := cloudStatus(opDefault, err, "attach %s to %s%s", volID, nodeID, mode)
		// ALREADY_EXISTS says the pair is attached, in the other mode: nothing for the
		// backoff to learn (it would forget that the pair is attached).
		if s.backoff != nil && status.Code(st) != codes.AlreadyExists {
			s.backoff.Record(nodeID, volID, err, st)
		}
		return nil, st
	}
	state, code, msg := att.State, att.ErrorCode, att.ErrorMessage
	if state == cloud.StateAttaching {
		v, err := s.waitTransition(ctx, volID, nodeID, cloud.StateAttaching)
		switch {
		case errors.Is(err, errStillRunning):
			klog.FromContext(ctx).V(2).Info("Attach still in progress at the deadline", "volumeID", volID, "nodeID", nodeID)
			return nil, stillRunning("attach", volID, nodeID)
		case err != nil:
			class = cloudClass(err)
			return nil, cloudStatus(opDefault, err, "wait for the attach of %s to %s", volID, nodeID)
		}
		state, code, msg = v.State, v.ErrorCode, v.ErrorMessage
		if v.AttachedTo != nodeID && state != cloud.StateError {
			return nil, status.Errorf(codes.Aborted, "volume %s changed while attaching to %s: now %s on %q", volID, nodeID, v.State, v.AttachedTo)
		}
	}
	switch state {
	case cloud.StateAttached:
	case cloud.StateError:
		class = cloudClass(cloud.NewError(code, "%s", msg))
		failed := transitionFailure(code, msg)
		st := cloudStatus(opDefault, failed, "attach %s to %s", volID, nodeID)
		if s.backoff != nil {
			s.backoff.Record(nodeID, volID, failed, st)
		}
		return nil, st
	default:
		return nil, status.Errorf(codes.Aborted, "volume %s is %s on %s", volID, state, nodeID)
	}
	if s.backoff != nil {
		s.backoff.Record(nodeID, volID, nil, nil)
	}
	klog.FromContext(ctx).V(2).Info("Volume attached", "volumeID", volID, "nodeID", nodeID, "device", att.Device, "readOnly", ro)
	pc := map[string]string{PublishContextDevicePath: att.Device}
	if ro {
		pc[PublishContextReadOnly] = "true"
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: pc}, nil
}

// checkBackoff returns the remembered error when the publish of volID to nodeID must not
// reach the cloud yet, else nil, with the class label of the outcome so far (backoff for a
// refusal, the lookup's class when the cloud was asked, notAsked otherwise). A node-wide
// RESOURCE_EXHAUSTED is confirmed against the cloud's view of the volume first: the
// in-memory record of published volumes is empty after a restart, and an attached volume
// must get its idempotent OK, never RESOURCE_EXHAUSTED (its pod would be rejected). The
// cloud is only asked when the window would refuse.
func (s *ControllerServer) checkBackoff(ctx context.Context, volID, nodeID string) (class string, err error) {
	if s.backoff == nil {
		return classNotAsked, nil
	}
	window, refused := s.backoff.Check(nodeID, volID)
	if refused == nil {
		return classNotAsked, nil
	}
	if window != backoff.ClassCapacity {
		s.metrics.refused(window)
		return classBackoff, refused
	}
	v, lookupErr := s.cloud.GetVolume(ctx, volID)
	if err := s.ok(lookupErr); err != nil {
		// Not confirmed either way: the lookup's own error, never a guessed capacity error.
		return cloudClass(err), cloudStatus(opDefault, err, "get volume %s", volID)
	}
	if v.AttachedTo != nodeID {
		klog.FromContext(ctx).V(4).Info("Publish refused by the capacity backoff", "volumeID", volID, "nodeID", nodeID)
		s.metrics.refused(window)
		return classBackoff, refused
	}
	s.backoff.Published(nodeID, volID)
	return classNotAsked, nil
}

// ControllerUnpublishVolume detaches the volume from the node. A missing volume or node, or a
// volume not attached there, is success. Without node_id the volume is detached from wherever
// it is attached (CSI spec: "unpublish from all nodes").
//
// It mirrors ControllerPublishVolume: it starts the cloud's detach and waits for detached
// within its deadline (the slot is held until then, and answering OK earlier would let the
// scheduler count a slot the cloud still holds); a retry joins the detach under way; at the
// deadline the answer is DEADLINE_EXCEEDED and the next call returns OK once detached; a
// detach the cloud ends in error is answered with the code of its failure.
func (s *ControllerServer) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (_ *csi.ControllerUnpublishVolumeResponse, err error) {
	class := classNotAsked
	defer func() { s.metrics.observe(opUnpublish, err, class) }()
	if err := validateControllerUnpublishVolumeRequest(req); err != nil {
		return nil, err
	}
	volID, nodeID := req.GetVolumeId(), req.GetNodeId()
	if !s.inflight.tryJoin(volID, "unpublish/"+nodeID) {
		return nil, aborted(volID)
	}
	defer s.inflight.release(volID)
	if nodeID == "" {
		v, err := s.cloud.GetVolume(ctx, volID)
		class = cloudClass(err)
		if err := s.ok(err); err != nil {
			if err := cloudStatus(opGone, err, "get volume %s", volID); err != nil {
				return nil, err
			}
			return &csi.ControllerUnpublishVolumeResponse{}, nil
		}
		if v.AttachedTo == "" {
			return &csi.ControllerUnpublishVolumeResponse{}, nil
		}
		nodeID = v.AttachedTo
	}
	att, detachErr := s.cloud.DetachVolume(ctx, volID, nodeID)
	class = cloudClass(detachErr)
	if err := cloudStatus(opGone, s.ok(detachErr), "detach %s from %s", volID, nodeID); err != nil {
		return nil, err
	}
	if detachErr == nil {
		state, code, msg := att.State, att.ErrorCode, att.ErrorMessage
		if state == cloud.StateDetaching {
			v, err := s.waitTransition(ctx, volID, nodeID, cloud.StateDetaching)
			switch {
			case errors.Is(err, errStillRunning):
				klog.FromContext(ctx).V(2).Info("Detach still in progress at the deadline", "volumeID", volID, "nodeID", nodeID)
				return nil, stillRunning("detach", volID, nodeID)
			case err != nil:
				class = cloudClass(err)
				if err := cloudStatus(opGone, err, "wait for the detach of %s from %s", volID, nodeID); err != nil {
					return nil, err
				}
				v = &cloud.Volume{ID: volID, State: cloud.StateDetached} // gone: detached
			}
			state, code, msg = v.State, v.ErrorCode, v.ErrorMessage
			if v.AttachedTo != nodeID {
				state = cloud.StateDetached
			}
		}
		switch state {
		case cloud.StateDetached:
		case cloud.StateError:
			class = cloudClass(cloud.NewError(code, "%s", msg))
			return nil, transitionError(opDefault, code, msg, "detach %s from %s", volID, nodeID)
		default:
			return nil, status.Errorf(codes.Aborted, "volume %s is %s on %s again", volID, state, nodeID)
		}
	}
	if s.backoff != nil {
		// A slot may be free now: the next publish to the node asks the cloud again.
		s.backoff.Detached(nodeID, volID)
	}
	klog.FromContext(ctx).V(2).Info("Volume detached", "volumeID", volID, "nodeID", nodeID)
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms the capabilities when every one is supported (single-node
// access modes, mount or block); otherwise it answers without confirmation and says why. A
// missing volume is NOT_FOUND.
func (s *ControllerServer) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := validateValidateVolumeCapabilitiesRequest(req); err != nil {
		return nil, err
	}
	_, err := s.cloud.GetVolume(ctx, req.GetVolumeId())
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "get volume %s", req.GetVolumeId())
	}
	for _, c := range req.GetVolumeCapabilities() {
		if p := capabilityProblem(c); p != "" {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: p}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// ListVolumes pages through the cloud's volumes; starting_token is the cloud's page token, and
// a token the cloud rejects is ABORTED (CSI spec). Each entry lists the node it is attached to.
func (s *ControllerServer) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if err := validateListVolumesRequest(req); err != nil {
		return nil, err
	}
	page, err := s.cloud.ListVolumes(ctx, int(req.GetMaxEntries()), req.GetStartingToken())
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opPage, err, "list volumes")
	}
	resp := &csi.ListVolumesResponse{NextToken: page.NextPageToken}
	for i := range page.Volumes {
		v := &page.Volumes[i]
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: csiVolume(v),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: publishedNodes(v)},
		})
	}
	return resp, nil
}

// ControllerGetVolume returns a volume and the node it is attached to; NOT_FOUND if missing.
func (s *ControllerServer) ControllerGetVolume(ctx context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if err := validateControllerGetVolumeRequest(req); err != nil {
		return nil, err
	}
	v, err := s.cloud.GetVolume(ctx, req.GetVolumeId())
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "get volume %s", req.GetVolumeId())
	}
	return &csi.ControllerGetVolumeResponse{
		Volume: csiVolume(v),
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{PublishedNodeIds: publishedNodes(v)},
	}, nil
}

// GetCapacity reports the account's capacity-bytes quota headroom, in bytes. The quota is
// account-wide, so accessible_topology does not narrow it; unsupported capabilities get 0.
func (s *ControllerServer) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if err := validateGetCapacityRequest(req); err != nil {
		return nil, err
	}
	for _, c := range req.GetVolumeCapabilities() {
		if capabilityProblem(c) != "" {
			return &csi.GetCapacityResponse{AvailableCapacity: 0}, nil
		}
	}
	q, err := s.cloud.GetQuotas(ctx)
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "get quotas")
	}
	free := max(0, q.CapacityBytes.Limit-q.CapacityBytes.Used)
	return &csi.GetCapacityResponse{
		AvailableCapacity: free,
		MaximumVolumeSize: wrapperspb.Int64(min(free/GiB*GiB, MaxVolumeSize)),
		MinimumVolumeSize: wrapperspb.Int64(GiB),
	}, nil
}

func csiSnapshot(s *cloud.Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SizeBytes:      s.SizeBytes,
		SnapshotId:     s.ID,
		SourceVolumeId: s.SourceVolumeID,
		CreationTime:   timestamppb.New(s.CreatedAt),
		ReadyToUse:     s.ReadyToUse,
		// A group's member says so: the CO must not delete it on its own (CSI spec,
		// DeleteSnapshot), and the cloud refuses that with FAILED_PRECONDITION.
		GroupSnapshotId: s.GroupSnapshotID,
	}
}

// CreateSnapshot snapshots a volume, idempotent by name; the same name for another volume is
// ALREADY_EXISTS, a missing source volume NOT_FOUND. With a volume data folder it keeps a copy
// of the source's data for the volumes restored from the snapshot (snapshotdata.go). When that
// copy fails (copyStatus: FAILED_PRECONDITION for a device node or a tree beyond the bounds,
// UNAVAILABLE for a volume that kept changing, INTERNAL) the cloud snapshot just made is
// deleted again, so a failed call leaves nothing (its ID was never returned, so nothing else
// would delete it); a retry snapshots and copies anew.
func (s *ControllerServer) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := validateCreateSnapshotRequest(req); err != nil {
		return nil, err
	}
	key := "snapshot/" + req.GetName()
	if !s.inflight.tryAcquire(key) {
		return nil, aborted(req.GetName())
	}
	defer s.inflight.release(key)
	snap, err := s.cloud.CreateSnapshot(ctx, cloud.CreateSnapshotRequest{Name: req.GetName(), SourceVolumeID: req.GetSourceVolumeId()})
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "snapshot %s as %s", req.GetSourceVolumeId(), req.GetName())
	}
	if err := s.snapData.capture(ctx, snap.SourceVolumeID, snap.ID); err != nil {
		return nil, undoCreate(ctx, err, "snapshot", snap.ID, func(ctx context.Context) error {
			return s.ok(s.cloud.DeleteSnapshot(ctx, snap.ID))
		})
	}
	klog.FromContext(ctx).V(2).Info("Snapshot created", "snapshotID", snap.ID, "volumeID", snap.SourceVolumeID)
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

// GetSnapshot returns one snapshot (GET_SNAPSHOT); NOT_FOUND when it does not exist.
func (s *ControllerServer) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if err := validateGetSnapshotRequest(req); err != nil {
		return nil, err
	}
	snap, err := s.cloud.GetSnapshot(ctx, req.GetSnapshotId())
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "get snapshot %s", req.GetSnapshotId())
	}
	return &csi.GetSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

// DeleteSnapshot deletes a snapshot and the data kept for it; one that does not exist is
// success.
func (s *ControllerServer) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := validateDeleteSnapshotRequest(req); err != nil {
		return nil, err
	}
	id := req.GetSnapshotId()
	if err := cloudStatus(opGone, s.ok(s.cloud.DeleteSnapshot(ctx, id)), "delete snapshot %s", id); err != nil {
		return nil, err
	}
	if err := s.snapData.remove(ctx, id); err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots lists snapshots by ID (at most one; none when it does not exist), by source
// volume, or all, paged through the cloud's page token (a rejected token is ABORTED).
func (s *ControllerServer) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if err := validateListSnapshotsRequest(req); err != nil {
		return nil, err
	}
	if id := req.GetSnapshotId(); id != "" {
		snap, err := s.cloud.GetSnapshot(ctx, id)
		if errors.Is(err, cloud.ErrSnapshotNotFound) {
			return &csi.ListSnapshotsResponse{}, nil
		}
		if err := s.ok(err); err != nil {
			return nil, cloudStatus(opDefault, err, "get snapshot %s", id)
		}
		if src := req.GetSourceVolumeId(); src != "" && snap.SourceVolumeID != src {
			return &csi.ListSnapshotsResponse{}, nil
		}
		return &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: csiSnapshot(snap)}}}, nil
	}
	page, err := s.cloud.ListSnapshots(ctx, cloud.ListSnapshotsOptions{
		SourceVolumeID: req.GetSourceVolumeId(), MaxResults: int(req.GetMaxEntries()), PageToken: req.GetStartingToken(),
	})
	if errors.Is(err, cloud.ErrVolumeNotFound) {
		// Snapshots of a volume that does not exist: there are none.
		return &csi.ListSnapshotsResponse{}, nil
	}
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opPage, err, "list snapshots")
	}
	resp := &csi.ListSnapshotsResponse{NextToken: page.NextPageToken}
	for i := range page.Snapshots {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(&page.Snapshots[i])})
	}
	return resp, nil
}

// ControllerExpandVolume grows a volume to capacity_range rounded up to whole GiB
// (OUT_OF_RANGE when the range cannot be met); asking for less than the current size returns
// the current size. node_expansion_required is true: a mounted volume's filesystem and a block
// volume's backing file grow on the node (CSI spec, ControllerExpandVolume).
func (s *ControllerServer) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if err := validateControllerExpandVolumeRequest(req); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if !s.inflight.tryAcquire(id) {
		return nil, aborted(id)
	}
	defer s.inflight.release(id)
	size, err := volumeSize(req.GetCapacityRange(), 0)
	if err != nil {
		return nil, err
	}
	v, err := s.cloud.GetVolume(ctx, id)
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "get volume %s", id)
	}
	if v.SizeBytes < size {
		v, err = s.cloud.ResizeVolume(ctx, id, size)
		if err := s.ok(err); err != nil {
			return nil, cloudStatus(opDefault, err, "resize volume %s to %d bytes", id, size)
		}
		klog.FromContext(ctx).V(2).Info("Volume resized", "volumeID", id, "sizeBytes", v.SizeBytes)
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.SizeBytes, NodeExpansionRequired: true}, nil
}

// ControllerModifyVolume sets a volume's mutable parameters (MODIFY_VOLUME: "type", "iops",
// from a VolumeAttributesClass); asking for what the volume has is OK and changes nothing.
// Unknown keys and bad values are INVALID_ARGUMENT, a missing volume NOT_FOUND. No type
// takes more than one attach slot, so a modify never changes the node's capacity
// (docs/design.md, "Volume types and attach slots").
func (s *ControllerServer) ControllerModifyVolume(ctx context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	mod, err := validateControllerModifyVolumeRequest(req)
	if err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if !s.inflight.tryAcquire(id) {
		return nil, aborted(id)
	}
	defer s.inflight.release(id)
	v, err := s.cloud.ModifyVolume(ctx, id, mod)
	if err := s.ok(err); err != nil {
		return nil, cloudStatus(opDefault, err, "modify volume %s", id)
	}
	klog.FromContext(ctx).V(2).Info("Volume modified", "volumeID", id, "type", v.Type, "iops", v.IOPS)
	return &csi.ControllerModifyVolumeResponse{}, nil
}

// ControllerGetCapabilities advertises exactly the RPCs this service implements.
func (s *ControllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}
