package cloud

import "time"

// InstanceType is a machine shape. MaxAttachments is the number of attach slots an instance of
// this type has in total, including slots used by things other than this driver's volumes;
// at least 1 (a seed with 0 is refused: 0 reads as "unlimited" in CSI), at most MaxAttachSlots.
type InstanceType struct {
	Name           string `json:"name"`
	MaxAttachments int    `json:"maxAttachments"`
	// AttachDurationMS and DetachDurationMS, when set, are how long an attach stays
	// attaching and a detach detaching on instances of this type, in milliseconds, 0 to
	// MaxTransitionMS; 0 completes the transition within the request (the answer is already
	// attached or detached). Unset: the server's defaults (fakecloud --attach-duration,
	// --detach-duration).
	AttachDurationMS *int `json:"attachDurationMs,omitempty"`
	DetachDurationMS *int `json:"detachDurationMs,omitempty"`
}

// MaxTransitionMS bounds every attach or detach duration, of an instance type, a fault rule
// or a server default, in milliseconds: an hour is longer than any cloud takes and any test
// waits.
const MaxTransitionMS = 3600 * 1000

// AttachState is where a volume is in its attach lifecycle (docs/attach.md):
//
//	detached --attach--> attaching --(duration)--> attached --detach--> detaching --(duration)--> detached
//
// A volume holds a slot of its instance and one unit of the attachment quota from the start
// of attaching to the end of detaching. A transition that a fault rule fails ends in error:
// a failed attach releases its slot (the volume is not attached anywhere), a failed detach
// keeps it (the volume is still attached, AttachedTo names the instance).
type AttachState string

// The attach states.
const (
	StateDetached  AttachState = "detached"
	StateAttaching AttachState = "attaching"
	StateAttached  AttachState = "attached"
	StateDetaching AttachState = "detaching"
	StateError     AttachState = "error"
)

// Transient reports whether s is a state that completes by itself (attaching, detaching).
func (s AttachState) Transient() bool { return s == StateAttaching || s == StateDetaching }

// Instance is a virtual machine; its ID is the CSI node ID.
type Instance struct {
	ID           string `json:"id"`
	Zone         string `json:"zone"`
	InstanceType string `json:"instanceType"`
	// AttachLimitOverride, when set, replaces the instance type's MaxAttachments, in slots,
	// 1 to MaxAttachSlots (InstancePatch.AttachLimit).
	AttachLimitOverride *int `json:"attachLimitOverride,omitempty"`
	// AttachLimit is the effective limit, in slots: the override if set, else the type's
	// MaxAttachments.
	AttachLimit int `json:"attachLimit"`
	// OutOfBandSlots are slots taken by things this driver does not manage (boot disk, NICs,
	// GPUs, other drivers), 0 to AttachLimit.
	OutOfBandSlots int `json:"outOfBandSlots"`
	// Attachments lists the IDs of the volumes attached to this instance, sorted: every
	// volume holding one of its slots, whatever its state (as Capacity.Attached counts them).
	Attachments []string `json:"attachments"`
	// Attaching, Detaching and Failed count the Attachments in those states (docs/attach.md):
	// attaching, detaching, and in error after a failed detach; the rest are attached. They
	// are Capacity's counts, here so that one GET /v1/instances shows every instance's
	// transitions.
	Attaching int       `json:"attaching"`
	Detaching int       `json:"detaching"`
	Failed    int       `json:"failed"`
	CreatedAt time.Time `json:"createdAt"`
	// Revision is the global revision of the instance's last change.
	Revision uint64 `json:"revision"`
	// Health is the instance's health now: the worse of what PUT /v1/instances/{id}/health
	// set and any live health fault rule; "ok" when neither says otherwise. Not part of the
	// revisioned state: health is test configuration held in the server's memory, as fault
	// rules are, so it changes no revision.
	Health InstanceHealth `json:"health,omitempty"`
	// HealthMessage says why Health is not ok; empty when it is.
	HealthMessage string `json:"healthMessage,omitempty"`
}

// CreateInstanceRequest is the body of POST /v1/instances. Creating an existing ID with the
// same fields returns the existing instance; different fields are a 409 AlreadyExists.
// InvalidArgument: an ID that is empty, over 128 bytes (MaxIDBytes, a CSI node_id's limit),
// "." or "..", or holds a control character; a zone that is not a CSI topology value (1-63 characters, alphanumerics
// at both ends, '-', '_', '.' between); an unknown type; OutOfBandSlots below 0 or above the
// type's MaxAttachments (itself at most MaxAttachSlots) (equal leaves no slot for volumes, which is allowed).
type CreateInstanceRequest struct {
	ID             string `json:"id"`
	Zone           string `json:"zone"`
	InstanceType   string `json:"instanceType"`
	OutOfBandSlots int    `json:"outOfBandSlots"`
}

// InstancePatch is the body of PATCH /v1/instances/{id} (admin); nil fields are left as they
// are. AttachLimit sets the per-instance override, in slots (1 to MaxAttachSlots;
// OutOfBandSlots 0 to MaxAttachSlots); ClearAttachLimit removes it; InstanceType names one of
// GET /v1/instance-types. The patched instance's OutOfBandSlots may not exceed its effective
// attach limit (equal is how to leave no slot for volumes), so lowering both takes one patch
// with both fields. Lowering a limit below the slots in use is allowed: it refuses new
// attaches and detaches nothing. Errors, each changing nothing: 400 InvalidArgument (what
// Check reports, an unknown instanceType, out-of-band slots above the resulting limit), 404
// InstanceNotFound, 412 PreconditionFailed (If-Match, PatchInstanceIfMatch).
type InstancePatch struct {
	AttachLimit      *int    `json:"attachLimit,omitempty"`
	ClearAttachLimit bool    `json:"clearAttachLimit,omitempty"`
	OutOfBandSlots   *int    `json:"outOfBandSlots,omitempty"`
	InstanceType     *string `json:"instanceType,omitempty"`
}

// Capacity is the raw attach-capacity facts of one instance at one revision, the answer of
// GET /v1/instances/{id}/capacity. The cloud applies no policy; the driver does
// (docs/design.md, "Capacity model").
type Capacity struct {
	InstanceID string `json:"instanceId"`
	// AttachLimit is the effective per-instance attach limit, in slots.
	AttachLimit int `json:"attachLimit"`
	// OutOfBandSlots are slots held by things other than volumes attached through the API.
	OutOfBandSlots int `json:"outOfBandSlots"`
	// Attached is the number of slots held by volumes through the API: volumes attaching,
	// attached, detaching, or in error after a failed detach (they hold a slot from the start
	// of attaching to the end of detaching). Attaching, Detaching and Failed say how many of
	// them are in those states.
	Attached  int `json:"attached"`
	Attaching int `json:"attaching"`
	Detaching int `json:"detaching"`
	// Failed counts volumes whose detach ended in error: still attached, holding a slot.
	Failed int `json:"failed"`
	// QuotaHeadroom is the account's attachment quota limit minus attachments in use across
	// all instances, in attachments (one per volume holding a slot); never negative.
	QuotaHeadroom int64 `json:"quotaHeadroom"`
	// Instances is the number of instances in the account, the ones that share the
	// attachment quota (the driver's "even" quota share divides QuotaHeadroom by it).
	Instances int `json:"instances"`
	// Revision is the global revision this reading was taken at.
	Revision uint64 `json:"revision"`
	// Health is the instance's health (Instance.Health) when the reading was taken: an
	// impaired or stopped instance takes no attaches whatever its free slots, and the
	// driver's capacity policy reads it (docs/design.md, "Capacity model").
	Health InstanceHealth `json:"health,omitempty"`
	// Epoch names the cloud's store: it is fixed when a data dir is first created and changes
	// only when the store starts empty again, where revisions restart. Revisions are
	// comparable only within one epoch.
	Epoch string `json:"epoch"`
	// ObservedAt is the server's clock (UTC) when the reading was taken.
	ObservedAt time.Time `json:"observedAt"`
}

// Slots is the number of slots volumes attached through the API may hold on the instance:
// AttachLimit − OutOfBandSlots. It is the one statement of that formula, read by the store's
// attach check, the driver's capacity policy, the unit tests' fake and the e2e truth; it is
// negative only for facts the cloud never reports (out-of-band slots above the limit).
func (c Capacity) Slots() int { return c.AttachLimit - c.OutOfBandSlots }

// FreeSlots is how many more volumes the instance takes now: Slots − Attached. Zero or less
// means an attach is AttachmentLimitExceeded.
func (c Capacity) FreeSlots() int { return c.Slots() - c.Attached }

// Volume is a block volume. A volume is bound to at most one instance (AttachedTo), whose
// slot it holds while it is attaching, attached, detaching, or in error after a failed detach.
type Volume struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	SizeBytes        int64  `json:"sizeBytes"`
	Zone             string `json:"zone"`
	SourceSnapshotID string `json:"sourceSnapshotId,omitempty"`
	// SourceVolumeID is the volume this one was cloned from, if any.
	SourceVolumeID string `json:"sourceVolumeId,omitempty"`
	// Type is one of VolumeTypes ("standard" when empty) and IOPS its provisioned IOPS (0:
	// the type's baseline): the mutable parameters, changed by POST /v1/volumes/{id}/modify.
	Type       string `json:"type,omitempty"`
	IOPS       int    `json:"iops,omitempty"`
	AttachedTo string `json:"attachedTo,omitempty"`
	Device     string `json:"device,omitempty"`
	// ReadOnly is true while the volume is attaching or attached read-only
	// (AttachRequest.ReadOnly).
	ReadOnly bool `json:"readOnly,omitempty"`
	// State is the attach state; StateSince is when the volume entered it (absent for a
	// volume that never changed state since this was recorded).
	State      AttachState `json:"state"`
	StateSince *time.Time  `json:"stateSince,omitempty"`
	// ErrorCode and ErrorMessage say why the last transition ended in state error.
	ErrorCode    Code      `json:"errorCode,omitempty"`
	ErrorMessage string    `json:"errorMessage,omitempty"`
	CreatedAt    time.Time `json:"createdAt"`
	Revision     uint64    `json:"revision"`
	// Health is the volume's health now: the worse of what PUT /v1/volumes/{id}/health set
	// and any live health fault rule; "ok" when neither says otherwise. In memory, like
	// Instance.Health: it changes no revision.
	Health VolumeHealth `json:"health,omitempty"`
	// HealthMessage says why Health is not ok; empty when it is.
	HealthMessage string `json:"healthMessage,omitempty"`
}

// CreateVolumeRequest is the body of POST /v1/volumes. Name is the idempotency key: the same
// name with the same parameters returns the existing volume, different parameters are a 409
// AlreadyExists. Name follows CSI's rule for volume names: at most 128 bytes, none of the
// control characters U+0000-U+0008, U+000B, U+000C, U+000E-U+001F, U+007F-U+009F. Zone must
// be known: the zone of an instance, or the server's default zone (which an empty Zone
// means); else InvalidArgument. SizeBytes is in bytes, > 0; the account's bytes quota is
// CapacityQuotaExceeded. SourceSnapshotID and SourceVolumeID (a clone) are exclusive; a
// clone is in its source's zone (an empty Zone means it) and at least its size, else
// InvalidArgument; a missing source is SnapshotNotFound or VolumeNotFound.
type CreateVolumeRequest struct {
	Name             string `json:"name"`
	SizeBytes        int64  `json:"sizeBytes"`
	Zone             string `json:"zone"`
	SourceSnapshotID string `json:"sourceSnapshotId,omitempty"`
	SourceVolumeID   string `json:"sourceVolumeId,omitempty"`
}

// VolumeList is one page of GET /v1/volumes. NextPageToken is empty on the last page.
type VolumeList struct {
	Volumes       []Volume `json:"volumes"`
	NextPageToken string   `json:"nextPageToken,omitempty"`
}

// AttachRequest is the body of POST /v1/volumes/{id}/attach and /detach.
type AttachRequest struct {
	InstanceID string `json:"instanceId"`
	// ReadOnly attaches the volume read-only (attach only; a detach with it is
	// InvalidArgument): the instance may read the device but not write it. The mode is part
	// of the attachment: attaching again to the same instance in the other mode is
	// AlreadyExists (CSI's "volume published but is incompatible"); detach first. A read-only
	// attachment takes a slot like any other (docs/design.md, "Capacity model").
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Attachment is the answer of an attach or detach: where the volume appears on the instance
// and the state it is in after the request, with the time it entered it. The HTTP status is
// 202 while the state is transient (attaching, detaching: poll GET /v1/volumes/{id}) and 200
// otherwise (attached, detached, or error when the transition failed at once). State is that
// of the volume's attachment to InstanceID: a detach from an instance the volume is not bound
// to answers detached (idempotent, docs/attach.md) even while the volume is bound elsewhere.
type Attachment struct {
	VolumeID   string      `json:"volumeId"`
	InstanceID string      `json:"instanceId"`
	Device     string      `json:"device"`
	State      AttachState `json:"state"`
	// Since is when the attachment entered State; absent (zero) when there is no such time:
	// a detach from an instance the volume is not bound to while it is bound to another.
	Since time.Time `json:"since,omitzero"`
	// Due is when an attaching or detaching volume is expected to reach its next state;
	// absent outside a transition and while a fault rule holds it (TransitionStick).
	Due *time.Time `json:"due,omitempty"`
	// ErrorCode and ErrorMessage say why the transition failed (State error).
	ErrorCode    Code   `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	// ReadOnly is the attachment's mode (AttachRequest.ReadOnly), while attaching or attached.
	ReadOnly bool   `json:"readOnly,omitempty"`
	Revision uint64 `json:"revision"`
}

// ResizeRequest is the body of POST /v1/volumes/{id}/resize: SizeBytes is the new size, in
// bytes; volumes only grow (the same size is a success that changes nothing). Errors: 400
// InvalidArgument (a smaller size, size ≤ 0), 404 VolumeNotFound, 409 CapacityQuotaExceeded
// (the growth is past the account's capacityBytes quota).
type ResizeRequest struct {
	SizeBytes int64 `json:"sizeBytes"`
}

// Snapshot is a point-in-time copy of a volume (CSI's Snapshot message).
type Snapshot struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	SourceVolumeID string `json:"sourceVolumeId"`
	// SizeBytes is the source volume's size when the snapshot was cut, in bytes: the least
	// size of a volume created from it (CSI's Snapshot.size_bytes).
	SizeBytes  int64     `json:"sizeBytes"`
	ReadyToUse bool      `json:"readyToUse"`
	CreatedAt  time.Time `json:"createdAt"`
	Revision   uint64    `json:"revision"`
	// GroupSnapshotID names the group snapshot this snapshot is a member of, "" for a
	// snapshot of its own. A member is deleted with its group only (DeleteSnapshot refuses it
	// with SnapshotInGroup, as CSI's DeleteSnapshot may not delete one); a volume may be
	// created from it like from any snapshot.
	GroupSnapshotID string `json:"groupSnapshotId,omitempty"`
}

// CreateSnapshotRequest is the body of POST /v1/snapshots; Name is the idempotency key and
// follows the rule of CreateVolumeRequest.Name. Errors: 400 InvalidArgument (a bad name or
// volume ID), 404 VolumeNotFound, 409 AlreadyExists (the name taken by a snapshot of another
// volume).
type CreateSnapshotRequest struct {
	Name           string `json:"name"`
	SourceVolumeID string `json:"sourceVolumeId"`
}

// SnapshotList is one page of GET /v1/snapshots?sourceVolumeId=&maxResults=&pageToken=.
type SnapshotList struct {
	Snapshots     []Snapshot `json:"snapshots"`
	NextPageToken string     `json:"nextPageToken,omitempty"`
}

// MaxGroupSnapshotMembers bounds the source volumes of one group snapshot: a group is cut in
// one store transaction, and its answer lists every member, so both stay small. 64 is more
// volumes than one workload (a database with its logs and data disks) snapshots together.
const MaxGroupSnapshotMembers = 64

// GroupSnapshot is a set of snapshots of several volumes cut at one point in time: one store
// transaction takes them all, so every member has the group's CreatedAt and Revision, and no
// write to any of the volumes lies between two members (CSI's write-order consistency,
// CreateVolumeGroupSnapshot). Members are in the order of SourceVolumeIDs.
type GroupSnapshot struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// SourceVolumeIDs are the volumes snapshotted, sorted.
	SourceVolumeIDs []string `json:"sourceVolumeIds"`
	// Snapshots are the members, one per source volume, in the order of SourceVolumeIDs.
	Snapshots  []Snapshot `json:"snapshots"`
	ReadyToUse bool       `json:"readyToUse"`
	CreatedAt  time.Time  `json:"createdAt"`
	Revision   uint64     `json:"revision"`
}

// SnapshotIDs returns the IDs of the members, in the order of Snapshots.
func (g *GroupSnapshot) SnapshotIDs() []string {
	out := make([]string, 0, len(g.Snapshots))
	for _, sn := range g.Snapshots {
		out = append(out, sn.ID)
	}
	return out
}

// CreateGroupSnapshotRequest is the body of POST /v1/group-snapshots. Name is the idempotency
// key and follows the rule of CreateVolumeRequest.Name; SourceVolumeIDs are 1 to
// MaxGroupSnapshotMembers distinct volume IDs in any order. The same name with the same set
// of volumes is the existing group; another set is 409 AlreadyExists. Other errors: 400
// InvalidArgument (Check's), 400 ZoneMismatch (volumes in more than one zone), 404
// VolumeNotFound.
type CreateGroupSnapshotRequest struct {
	Name            string   `json:"name"`
	SourceVolumeIDs []string `json:"sourceVolumeIds"`
}

// Quota is one account quota: Limit and Used in the quota's unit (count or bytes).
type Quota struct {
	Limit int64 `json:"limit"`
	Used  int64 `json:"used"`
}

// Quotas is the answer of GET /v1/quotas.
type Quotas struct {
	// Attachments counts attached volumes across all instances.
	Attachments Quota `json:"attachments"`
	// Volumes counts volumes that exist.
	Volumes Quota `json:"volumes"`
	// CapacityBytes sums the size of all volumes, in bytes.
	CapacityBytes Quota  `json:"capacityBytes"`
	Revision      uint64 `json:"revision"`
}

// QuotasPatch is the body of PATCH /v1/quotas (admin); nil fields are left as they are.
// Attachments and Volumes are counts, 0 to MaxQuotaCount; CapacityBytes is in bytes, 0 to
// MaxQuotaBytes. A limit below current use is allowed (it refuses new use, it evicts
// nothing). Errors, each changing nothing: 400 InvalidArgument (what Check reports: an
// empty patch, a limit out of its bounds), 412 PreconditionFailed (If-Match,
// PatchQuotasIfMatch).
type QuotasPatch struct {
	Attachments   *int64 `json:"attachments,omitempty"`
	Volumes       *int64 `json:"volumes,omitempty"`
	CapacityBytes *int64 `json:"capacityBytes,omitempty"`
}

// Operation names a cloud operation, the unit fault rules target.
type Operation string

// The operations fault rules can target. OperationAny matches every operation.
const (
	OperationAny            Operation = "*"
	OperationCreateVolume   Operation = "CreateVolume"
	OperationDeleteVolume   Operation = "DeleteVolume"
	OperationGetVolume      Operation = "GetVolume"
	OperationListVolumes    Operation = "ListVolumes"
	OperationAttachVolume   Operation = "AttachVolume"
	OperationDetachVolume   Operation = "DetachVolume"
	OperationResizeVolume   Operation = "ResizeVolume"
	OperationModifyVolume   Operation = "ModifyVolume"
	OperationGetCapacity    Operation = "GetCapacity"
	OperationGetInstance    Operation = "GetInstance"
	OperationCreateSnapshot Operation = "CreateSnapshot"
	OperationDeleteSnapshot Operation = "DeleteSnapshot"
	OperationListSnapshots  Operation = "ListSnapshots"
	// OperationCreateGroupSnapshot and OperationDeleteGroupSnapshot are the group snapshot
	// routes; a rule fails or delays the whole group (never some of its members).
	OperationCreateGroupSnapshot Operation = "CreateGroupSnapshot"
	OperationDeleteGroupSnapshot Operation = "DeleteGroupSnapshot"
)

// FaultRule makes matching operations fail or slow down (docs/fakecloud-api.md, "Fault rules").
// A rule with Error == "" and LatencyMS > 0 only delays. For the counters, 0 (which the JSON
// encoding omits) means no bound: AfterCount 0 lets no call pass, Count 0 fires without
// limit, TTLSeconds 0 never expires. Rules live in the server's memory: a restart or
// POST /v1/reset brings back only the seeded ones.
//
// POST /v1/faults answers a rule it refuses with 400 InvalidArgument (every problem at once,
// faults.CheckNew: an ID set, an unknown operation, error code, transition or health, with
// the value likely meant; a bound crossed) and one past the server's rule limit with 409
// ServerLimitExceeded; either adds nothing.
type FaultRule struct {
	// ID is assigned by the server ("fault-N"); a request that sets it is refused.
	ID string `json:"id,omitempty"`
	// Operation is required: "*" (OperationAny) or one of the Operation constants.
	Operation Operation `json:"operation"`
	// InstanceID and VolumeID narrow the rule to one instance or volume; each is an
	// identifier (CheckID: at most MaxIDBytes).
	InstanceID string `json:"instanceId,omitempty"`
	VolumeID   string `json:"volumeId,omitempty"`
	// Error is the cloud error code to return (e.g. "AttachmentLimitExceeded"), or empty.
	Error Code `json:"error,omitempty"`
	// LatencyMS delays a matching call, in milliseconds, 0 to 60000. The latency of every
	// rule that fires for one call is summed and capped at 60000: past the cap the call
	// waits 60000 ms and fails with Unavailable.
	LatencyMS int `json:"latencyMs,omitempty"`
	// Probability that a matching call fires the rule, in (0, 1]. Omitted means 1; the
	// server fills it in, so a rule it returns always has one. An explicit 0 is refused
	// (InvalidArgument) rather than read as "always" or "never".
	Probability *float64 `json:"probability,omitempty"`
	// AfterCount lets the first N matching calls pass; 0: none.
	AfterCount int `json:"afterCount,omitempty"`
	// Count fires at most N times; 0 means unlimited.
	Count int `json:"count,omitempty"`
	// TTLSeconds removes the rule that many seconds after it was created, at most a year
	// (31536000); 0 means it never expires.
	TTLSeconds int `json:"ttlSeconds,omitempty"`
	// Seed seeds the rule's own random source for Probability (math/rand/v2's PCG), so runs
	// repeat; any value.
	Seed int64 `json:"seed,omitempty"`
	// Transition, for AttachVolume and DetachVolume rules only, makes the rule act on the
	// asynchronous transition a matching request starts instead of on the request itself
	// (docs/attach.md): TransitionSlow makes it take DurationMS; TransitionStick keeps it
	// from completing while the rule lives (deleted, cleared or expired: it completes); and
	// TransitionFail ends it in state error with Error (default InternalError) after DurationMS
	// (0: the usual duration). Such a rule fires only when a transition starts, never on a
	// repeated request that joins one, and takes no LatencyMS.
	Transition Transition `json:"transition,omitempty"`
	// DurationMS is the transition's duration for TransitionSlow (required, > 0) and
	// TransitionFail, in milliseconds, at most MaxTransitionMS.
	DurationMS int `json:"durationMs,omitempty"`
	// Health makes the rule a health rule: while it lives (TTLSeconds), the one instance
	// (InstanceID, an InstanceHealth) or volume (VolumeID, a VolumeHealth) it names reads
	// with this health, unless something worse is set. A health rule fires on no call: it
	// takes no Error, LatencyMS, Probability, AfterCount or Count, and its Operation is "*"
	// (an empty one is filled in).
	Health string `json:"health,omitempty"`
	// Fired is how often the rule has fired, a count (read only).
	Fired int `json:"fired"`
	// ExpiresAt is when a rule with TTLSeconds expires, by the server's clock (read only);
	// absent for a rule that never expires.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Transition names what a fault rule does to an attach or detach transition.
type Transition string

// The transition faults.
const (
	TransitionSlow  Transition = "slow"
	TransitionStick Transition = "stick"
	TransitionFail  Transition = "fail"
)

// Event is one entry of the audit log GET /v1/events?sinceRevision=N: every mutation and every
// fault that fired, in revision order.
type Event struct {
	// Seq orders events; it grows by one per event.
	Seq uint64 `json:"seq"`
	// Revision is the global revision after the event; a fault that fired records the
	// revision it saw, without bumping it.
	Revision uint64    `json:"revision"`
	Time     time.Time `json:"time"`
	// Type is e.g. VolumeAttaching, VolumeAttached, VolumeAttachFailed, VolumeDetaching,
	// VolumeDetached, VolumeDetachFailed, TransitionReleased, QuotasChanged, FaultFired.
	Type       string `json:"type"`
	VolumeID   string `json:"volumeId,omitempty"`
	InstanceID string `json:"instanceId,omitempty"`
	// Attached is the instance's count of slots held by volumes after the event (every
	// attach state but detached counts), for attach/detach events, so that "never more than
	// the limit at any revision" can be checked from the log.
	Attached *int `json:"attached,omitempty"`
	// Limit is the instance's slots for volumes after the event (Capacity.Slots: the attach
	// limit minus the out-of-band slots), with Attached.
	Limit *int `json:"limit,omitempty"`
	// Detail says more, for people (e.g. "attachLimit=8 outOfBandSlots=1 type=medium"); its
	// wording is no interface.
	Detail string `json:"detail,omitempty"`
}

// ListSnapshotsOptions filters and pages GET /v1/snapshots. Zero values mean no filter and
// the server's default page size.
type ListSnapshotsOptions struct {
	SnapshotID     string
	SourceVolumeID string
	MaxResults     int
	PageToken      string
}
