package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Attach starts attaching a volume to an instance (docs/attach.md), checking in one
// transaction: instance and volume exist (InstanceNotFound, VolumeNotFound), the volume is
// not bound to another instance (VolumeInUse), zones agree (ZoneMismatch), the instance has a
// free slot (slots held + outOfBandSlots < attachLimit, else AttachmentLimitExceeded) and the
// account quota has room (AttachmentQuotaExceeded). The slot and the quota are taken now.
// On the same instance: attaching or attached is answered as it is (nothing changes, plan is
// not asked), detaching is IncorrectState, error after a failed detach attaches again.
// plan is asked only when a transition starts. With register != nil a missing instance is
// created from it in the same transaction.
func (s *Store) Attach(volumeID, instanceID string, register *cloud.CreateInstanceRequest, plan Planner) (*cloud.Attachment, error) {
	return s.AttachMode(volumeID, instanceID, false, register, plan)
}

// AttachMode is Attach in a mode: readOnly attaches read-only (cloud.AttachRequest.ReadOnly).
// On the same instance, an attaching or attached volume in the other mode is AlreadyExists
// and nothing changes; an error volume (after a failed detach) attaches again in the mode
// asked for.
func (s *Store) AttachMode(volumeID, instanceID string, readOnly bool, register *cloud.CreateInstanceRequest, plan Planner) (*cloud.Attachment, error) {
	if volumeID == "" || instanceID == "" {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "attach: volume ID and instanceId are required")
	}
	var out *cloud.Attachment
	err := s.update(func(t *txn) error {
		var err error
		out, err = t.startAttach(volumeID, instanceID, readOnly, register, plan)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attach %s to %s: %w", volumeID, instanceID, err)
	}
	return out, nil
}

// startAttach is AttachMode's mutation: it loads the instance (registering it from register
// when that is set) and the volume, decides what the attach does (attachStepOf: every check
// but the quota's, before anything is written), then binds the volume when it is free and
// starts the transition.
func (t *txn) startAttach(volumeID, instanceID string, readOnly bool, register *cloud.CreateInstanceRequest, plan Planner) (*cloud.Attachment, error) {
	var iv *instView
	var err error
	if register != nil {
		iv, err = t.ensureInstance(*register)
	} else {
		iv, err = t.loadInstance(instanceID)
	}
	if err != nil {
		return nil, err
	}
	v, err := t.getVolume(volumeID)
	if err != nil {
		return nil, err
	}
	step, err := attachStepOf(v, iv, readOnly)
	if err != nil {
		return nil, err
	}
	switch step {
	case attachAnswered:
		return attachment(v, iv.rec.ID), nil
	case attachAgain:
		// The slot is held already.
		if _, err := t.bump(); err != nil {
			return nil, err
		}
	case attachBind:
		if err := t.takeSlot(v, iv); err != nil {
			return nil, err
		}
	}
	p := plan.plan()
	if err := t.startTransition(v, iv, cloud.StateAttaching, readOnly, &p); err != nil {
		return nil, err
	}
	return attachment(v, iv.rec.ID), nil
}

// attachStep is what an attach does with the volume it found.
type attachStep int

const (
	// attachAnswered: attaching or attached to the instance in the mode asked; the attach is
	// answered as it is (nothing changes, plan is not asked).
	attachAnswered attachStep = iota
	// attachAgain: in state error after a failed detach from the instance, whose slot it still
	// holds; the attach starts again.
	attachAgain
	// attachBind: bound to no instance; it takes a slot and starts attaching.
	attachBind
)

// attachStepOf decides what an attach of v to iv in mode readOnly does, from the two alone,
// or why it is refused: AlreadyExists (attaching or attached to iv in the other mode),
// IncorrectState (detaching from iv), VolumeInUse (bound to another instance), ZoneMismatch,
// AttachmentLimitExceeded (iv has no free slot). The account quota is takeSlot's to check.
func attachStepOf(v *volView, iv *instView, readOnly bool) (attachStep, error) {
	switch v.state.attachedTo {
	case iv.rec.ID:
		switch v.phase.State {
		case cloud.StateAttaching, cloud.StateAttached:
			if v.phase.ReadOnly != readOnly {
				return 0, cloud.NewError(cloud.CodeAlreadyExists, "volume %s is %s to %s with readOnly=%v; detach it before attaching with readOnly=%v",
					cloud.Quote(v.rec.ID), v.phase.State, cloud.Quote(iv.rec.ID), v.phase.ReadOnly, readOnly)
			}
			return attachAnswered, nil
		case cloud.StateDetaching:
			return 0, cloud.NewError(cloud.CodeIncorrectState, "volume %s is detaching from %s since %s; attach it again once detached",
				cloud.Quote(v.rec.ID), cloud.Quote(iv.rec.ID), v.phase.Since.Format(time.RFC3339))
		}
		// Error after a failed detach.
		return attachAgain, nil
	case "":
	default:
		return 0, cloud.NewError(cloud.CodeVolumeInUse, "volume %s is %s %s", cloud.Quote(v.rec.ID), boundPhrase(v.phase.State), cloud.Quote(v.state.attachedTo))
	}
	if v.rec.Zone != iv.rec.Zone {
		return 0, cloud.NewError(cloud.CodeZoneMismatch, "volume %s is in zone %s, instance %s in %s", cloud.Quote(v.rec.ID), cloud.Quote(v.rec.Zone), cloud.Quote(iv.rec.ID), cloud.Quote(iv.rec.Zone))
	}
	if iv.slots().FreeSlots() <= 0 {
		return 0, cloud.NewError(cloud.CodeAttachmentLimitExceeded, "instance %s: %s held by volumes + %s of limit %d",
			cloud.Quote(iv.rec.ID), plural.Of(iv.state.attached, "slot", "slots"), plural.Of(iv.rec.OutOfBandSlots, "out-of-band slot", "out-of-band slots"), iv.limit)
	}
	return attachBind, nil
}

// takeSlot binds the free volume vv to iv, taking a slot and a unit of attachment quota, and
// bumps the revision; AttachmentQuotaExceeded, with nothing written, when the account quota
// has no unit left. Only narrow records change: the volume's and the instance's state, one
// key in the instance's attachment bucket and the quota counters.
func (t *txn) takeSlot(vv *volView, iv *instView) error {
	q, err := t.quotas()
	if err != nil {
		return err
	}
	if q.Attachments.Used >= q.Attachments.Limit {
		return cloud.NewError(cloud.CodeAttachmentQuotaExceeded, "attachment quota %d reached", q.Attachments.Limit)
	}
	rev, err := t.bump()
	if err != nil {
		return err
	}
	vv.state = volumeState{revision: rev, attachedTo: iv.rec.ID}
	if err := t.putVolumeState(vv.rec.ID, vv.state); err != nil {
		return err
	}
	if err := t.putAttachment(iv.rec.ID, vv.rec.ID); err != nil {
		return err
	}
	iv.state.revision = rev
	iv.state.attached++
	if err := t.putInstanceState(iv.rec.ID, iv.state); err != nil {
		return err
	}
	q.Attachments.Used++
	return t.putQuotas(q)
}

// startTransition puts vv into state (attaching or detaching) on iv, planned by plan: it
// completes at once, in this transaction, when its duration is 0 and no rule holds it.
// readOnly is the attachment's mode (a detach keeps the mode it detaches).
func (t *txn) startTransition(vv *volView, iv *instView, state cloud.AttachState, readOnly bool, plan *TransitionPlan) error {
	for _, ev := range plan.Events {
		if err := t.event(ev); err != nil {
			return err
		}
	}
	d, err := t.duration(iv, state == cloud.StateDetaching, plan)
	if err != nil {
		return err
	}
	vv.phase = phase{State: state, Since: t.now, Due: t.now.Add(d), Stuck: plan.Stuck, Rule: plan.Rule, Fail: plan.Fail, Instance: iv.rec.ID, ReadOnly: readOnly}
	if d == 0 && !plan.Stuck {
		// A synchronous cloud: the request's own transaction completes it, with only the
		// completion's event, as before transitions existed.
		return t.complete(vv, iv)
	}
	if err := t.putPhase(vv.rec.ID, vv.phase); err != nil {
		return err
	}
	if vv.state.revision != t.rev {
		// The volume changed at this revision (its state), as its answer and GET say.
		vv.state.revision = t.rev
		if err := t.putVolumeState(vv.rec.ID, vv.state); err != nil {
			return err
		}
	}
	typ := "VolumeAttaching"
	if state == cloud.StateDetaching {
		typ = "VolumeDetaching"
	}
	return t.slotEvent(typ, vv.rec.ID, iv, fmt.Sprintf("due=%s%s", vv.phase.Due.Format(time.RFC3339Nano), planDetail(plan)))
}

// duration is how long a transition on iv takes: the plan's, else the instance type's, else
// the store's default.
func (t *txn) duration(iv *instView, detach bool, plan *TransitionPlan) (time.Duration, error) {
	if plan.Duration != nil {
		return *plan.Duration, nil
	}
	a, d, err := t.typeDurations(&iv.rec)
	if err != nil {
		return 0, err
	}
	typed, def := a, t.s.attachDuration
	if detach {
		typed, def = d, t.s.detachDuration
	}
	if typed != nil {
		return time.Duration(*typed) * time.Millisecond, nil
	}
	return def, nil
}

// typeDurations reads the instance type's own attach and detach durations, nil when unset.
func (t *txn) typeDurations(rec *instanceRec) (attach, detach *int, err error) {
	var it cloud.InstanceType
	if _, err := t.s.recs.types.getJSON(t.tx.Bucket(bucketTypes), []byte(rec.InstanceType), &it); err != nil {
		return nil, nil, err
	}
	return it.AttachDurationMS, it.DetachDurationMS, nil
}

func planDetail(plan *TransitionPlan) string {
	switch {
	case plan.Stuck:
		return " stuck by rule=" + plan.Rule
	case plan.Fail != "":
		return fmt.Sprintf(" fails with %s by rule=%s", plan.Fail, plan.Rule)
	}
	return ""
}

// complete ends vv's transition on iv: attaching becomes attached (or error, releasing the
// slot), detaching becomes detached (releasing the slot, or error, keeping it). The caller
// has loaded both in this transaction.
func (t *txn) complete(vv *volView, iv *instView) error {
	rev, err := t.bump()
	if err != nil {
		return err
	}
	p := vv.phase
	next := phase{State: cloud.StateAttached, Since: t.now, ReadOnly: p.ReadOnly}
	typ, detail := "VolumeAttached", DevicePrefix+vv.rec.ID
	switch {
	case p.State == cloud.StateAttaching && p.Fail == "":
		vv.state.revision = rev
		if err := t.putVolumeState(vv.rec.ID, vv.state); err != nil {
			return err
		}
	case p.State == cloud.StateAttaching:
		next = phase{State: cloud.StateError, Since: t.now, Fail: p.Fail, Rule: p.Rule, Instance: iv.rec.ID, From: p.State}
		typ, detail = "VolumeAttachFailed", string(p.Fail)
		if err := t.releaseSlot(vv, iv, rev); err != nil {
			return err
		}
	case p.Fail == "":
		next = phase{State: cloud.StateDetached, Since: t.now}
		typ, detail = "VolumeDetached", ""
		if err := t.releaseSlot(vv, iv, rev); err != nil {
			return err
		}
	default:
		// Still attached, in the mode it had.
		next = phase{State: cloud.StateError, Since: t.now, Fail: p.Fail, Rule: p.Rule, Instance: iv.rec.ID, From: p.State, ReadOnly: p.ReadOnly}
		typ, detail = "VolumeDetachFailed", string(p.Fail)
		vv.state.revision = rev
		if err := t.putVolumeState(vv.rec.ID, vv.state); err != nil {
			return err
		}
	}
	vv.phase = next
	if err := t.putPhase(vv.rec.ID, next); err != nil {
		return err
	}
	if iv.state.revision != rev {
		iv.state.revision = rev
		if err := t.putInstanceState(iv.rec.ID, iv.state); err != nil {
			return err
		}
	}
	return t.slotEvent(typ, vv.rec.ID, iv, detail)
}

// releaseSlot unbinds the volume from its instance, giving back the slot and the quota.
func (t *txn) releaseSlot(vv *volView, iv *instView, rev uint64) error {
	if iv.state.attached == 0 {
		return fmt.Errorf("volume %s is bound to %s, which counts no attachments: damaged store", vv.rec.ID, iv.rec.ID)
	}
	q, err := t.quotas()
	if err != nil {
		return err
	}
	vv.state = volumeState{revision: rev}
	if err := t.putVolumeState(vv.rec.ID, vv.state); err != nil {
		return err
	}
	if err := t.deleteAttachment(iv.rec.ID, vv.rec.ID); err != nil {
		return err
	}
	iv.state.revision = rev
	iv.state.attached--
	if err := t.putInstanceState(iv.rec.ID, iv.state); err != nil {
		return err
	}
	q.Attachments.Used--
	return t.putQuotas(q)
}

// slotEvent appends an attach or detach event carrying the instance's held-slot count and
// the limit the driver may use (limit - out-of-band slots).
func (t *txn) slotEvent(typ string, volID string, iv *instView, detail string) error {
	attached, limit := int(iv.state.attached), iv.slots().Slots()
	return t.event(cloud.Event{Type: typ, VolumeID: volID, InstanceID: iv.rec.ID, Attached: &attached, Limit: &limit, Detail: detail})
}

// attachment is the answer of an attach or detach for volume vv on instance instID.
func attachment(vv *volView, instID string) *cloud.Attachment {
	// From the phase alone, as volume() does, without building the whole volume: this runs in
	// the commit, which every caller sharing it waits for.
	a := &cloud.Attachment{
		VolumeID: vv.rec.ID, InstanceID: instID, Device: DevicePrefix + vv.rec.ID, State: vv.phase.State, Since: vv.phase.Since,
		ErrorCode: vv.phase.errorCode(), ErrorMessage: vv.phase.errorMessage(), Revision: vv.state.revision,
		ReadOnly: vv.phase.readOnly(),
	}
	if vv.phase.State.Transient() && !vv.phase.Stuck {
		due := vv.phase.Due
		a.Due = &due
	}
	return a
}

// Detach starts detaching a volume from an instance (docs/attach.md). It is idempotent: a
// volume not bound to that instance (or a missing instance) is answered detached with no
// change, and a volume detaching already is answered as it is. An attaching, attached or
// error volume starts detaching; its slot is held until the detach completes. A missing
// volume is VolumeNotFound. plan is asked only when a transition starts.
func (s *Store) Detach(volumeID, instanceID string, plan Planner) (*cloud.Attachment, error) {
	if volumeID == "" || instanceID == "" {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "detach: volume ID and instanceId are required")
	}
	var out *cloud.Attachment
	err := s.update(func(t *txn) error {
		var err error
		out, err = t.startDetach(volumeID, instanceID, plan)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("detach %s from %s: %w", volumeID, instanceID, err)
	}
	return out, nil
}

// startDetach is Detach's mutation: a volume bound elsewhere or nowhere is answered
// detached, one detaching already is answered as it is, any other one bound here starts
// detaching.
func (t *txn) startDetach(volumeID, instanceID string, plan Planner) (*cloud.Attachment, error) {
	// The state record alone says whether and where the volume is bound: the JSON record is
	// only decoded when it is bound here.
	vs, err := t.getVolumeState(volumeID)
	if err != nil {
		return nil, err
	}
	if vs.attachedTo != instanceID {
		out := &cloud.Attachment{VolumeID: volumeID, InstanceID: instanceID, State: cloud.StateDetached, Revision: t.rev}
		if vs.attachedTo == "" {
			// Detached here and everywhere: since the volume's own state says.
			v, err := t.getVolume(volumeID)
			if err != nil {
				return nil, err
			}
			out.Since = *v.volume().StateSince
		}
		return out, nil
	}
	v, err := t.getVolume(volumeID)
	if err != nil {
		return nil, err
	}
	if v.phase.State == cloud.StateDetaching {
		return attachment(v, instanceID), nil
	}
	iv, err := t.loadInstance(instanceID)
	if err != nil {
		return nil, err
	}
	if _, err := t.bump(); err != nil {
		return nil, err
	}
	p := plan.plan()
	if err := t.startTransition(v, iv, cloud.StateDetaching, v.phase.ReadOnly, &p); err != nil {
		return nil, err
	}
	out := attachment(v, instanceID)
	if out.State == cloud.StateDetached {
		out.Device = ""
	}
	return out, nil
}

// TransitionPlan is what the fault rules decided for one transition, asked for only when an
// attach or detach starts one (see Planner).
type TransitionPlan struct {
	// Duration, when set, replaces the instance type's or the store's duration.
	Duration *time.Duration
	// Stuck holds the transition until Rule is no longer live (see CompleteDue).
	Stuck bool
	// Fail ends the transition in state error with this code; empty: it succeeds.
	Fail cloud.Code
	// Rule names the rule that holds or fails the transition.
	Rule string
	// Events (the FaultFired events of the rules that fired) are recorded in the commit that
	// starts the transition.
	Events []cloud.Event
}

// Planner returns the plan of a transition that is about to start. A mutation may run more
// than once (see update), so a Planner with side effects (fault rules firing) must return
// the same plan on every call: memoize it.
type Planner func() TransitionPlan

func (p Planner) plan() TransitionPlan {
	if p == nil {
		return TransitionPlan{}
	}
	return p()
}

// boundPhrase words a volume's state towards the instance it is bound to, the one wording
// every message uses for that state: "attached to", "attaching to", "detaching from", "in
// state error, bound to".
func boundPhrase(s cloud.AttachState) string {
	switch s {
	case cloud.StateAttached, cloud.StateAttaching:
		return string(s) + " to"
	case cloud.StateDetaching:
		return string(s) + " from"
	default:
		return "in state " + string(s) + ", bound to"
	}
}

// The records below are what attach and detach change, each in a narrow record of its own
// (see Format) so that a commit of many attaches writes little besides the events: the
// volume's phase and its pendingTransitions entry, the volume's and the instance's state,
// and the instance's attachment bucket.

// phase is a volume's attach state (docs/attach.md), stored as JSON in volumePhases: the
// state, when the volume entered it and, while it is attaching or detaching, the transition
// under way. A volume without a record is in its format 2 state (attached when its
// volumeState names an instance, else detached) since an unknown time.
type phase struct {
	State cloud.AttachState `json:"s"`
	Since time.Time         `json:"t,omitzero"`
	// Due is when the transition completes (zero outside a transition). A transition a fault
	// rule holds (Stuck) waits past it until the rule is gone.
	Due   time.Time `json:"d,omitzero"`
	Stuck bool      `json:"k,omitempty"`
	// Rule is the fault rule that shaped the transition: holds it (Stuck) or fails it (Fail).
	Rule string `json:"r,omitempty"`
	// Fail is the code the transition ends in state error with (empty: it succeeds); in state
	// error, the code it ended with.
	Fail cloud.Code `json:"f,omitempty"`
	// Instance is the instance of the transition, kept in state error after a failed attach
	// (which releases the slot, so volumeState no longer names it).
	Instance string `json:"i,omitempty"`
	// From is, in state error, the transition that failed (attaching or detaching).
	From cloud.AttachState `json:"o,omitempty"`
	// ReadOnly is the attachment's mode while attaching, attached or detaching
	// (cloud.AttachRequest.ReadOnly).
	ReadOnly bool `json:"ro,omitempty"`
}

// apply writes the phase into v's API shape.
func (p phase) apply(v *cloud.Volume) {
	v.State = p.State
	v.ReadOnly = p.readOnly()
	if !p.Since.IsZero() {
		t := p.Since
		v.StateSince = &t
	}
	if p.State == cloud.StateError {
		v.ErrorCode, v.ErrorMessage = p.errorCode(), p.errorMessage()
	}
}

// readOnly is the volume's mode as the API shows it: read-only only while it is bound.
func (p phase) readOnly() bool {
	return p.ReadOnly && p.State != cloud.StateError && p.State != cloud.StateDetached
}

// errorCode is why the volume is in state error; empty in any other state.
func (p phase) errorCode() cloud.Code {
	if p.State != cloud.StateError {
		return ""
	}
	return p.Fail
}

func (p phase) errorMessage() string {
	if p.State != cloud.StateError {
		return ""
	}
	op := "detach from"
	if p.From == cloud.StateAttaching {
		op = "attach to"
	}
	msg := fmt.Sprintf("%s %s failed", op, p.Instance)
	if p.Rule != "" {
		msg += ": injected by fault rule " + p.Rule
	}
	return msg
}

// getPhase reads a volume's phase, or derives it from its state for a volume without one.
func (t *txn) getPhase(id string, vs volumeState) (phase, error) {
	data := t.tx.Bucket(bucketPhases).Get([]byte(id))
	if data == nil {
		if vs.attachedTo != "" {
			return phase{State: cloud.StateAttached}, nil
		}
		return phase{State: cloud.StateDetached}, nil
	}
	var p phase
	if err := json.Unmarshal(data, &p); err != nil {
		return phase{}, fmt.Errorf("volume %s: decode phase: %w", id, err)
	}
	return p, nil
}

// putPhase writes a volume's phase and keeps pendingTransitions in step: a volume is listed
// there exactly while it is attaching or detaching.
func (t *txn) putPhase(id string, p phase) error {
	if err := t.putJSON(bucketPhases, []byte(id), p); err != nil {
		return err
	}
	if p.State.Transient() {
		return t.put(bucketPending, []byte(id), encodePending(p))
	}
	return t.delete(bucketPending, []byte(id))
}

// encodePending is a pendingTransitions value: what the worker needs to schedule the
// transition, so that walking the bucket decodes no JSON: the due time (8 bytes of Unix
// nanoseconds), a stuck flag byte, then the holding rule's ID.
func encodePending(p phase) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 9+len(p.Rule)), uint64(p.Due.UnixNano()))
	stuck := byte(0)
	if p.Stuck {
		stuck = 1
	}
	return append(append(b, stuck), p.Rule...)
}

func decodePending(id string, b []byte) (Pending, error) {
	if len(b) < 9 {
		return Pending{}, fmt.Errorf("pending transition %s: record is %d bytes, want at least 9", id, len(b))
	}
	return Pending{VolumeID: id, Due: time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC(), Stuck: b[8] == 1, Rule: string(b[9:])}, nil
}

// volumeState is what attach and detach change about a volume: its revision and the instance
// it is attached to (empty: none). Stored as 8 bytes of revision, then the instance ID.
type volumeState struct {
	revision   uint64
	attachedTo string
}

func (v volumeState) encode() []byte {
	b := make([]byte, 8, 8+len(v.attachedTo))
	binary.BigEndian.PutUint64(b, v.revision)
	return append(b, v.attachedTo...)
}

func decodeVolumeState(b []byte) (volumeState, error) {
	if len(b) < 8 {
		return volumeState{}, fmt.Errorf("volume state record is %d bytes, want at least 8", len(b))
	}
	return volumeState{revision: binary.BigEndian.Uint64(b), attachedTo: string(b[8:])}, nil
}

// getVolumeState reads a volume's state record, which exists exactly as long as the volume;
// VolumeNotFound if absent.
func (t *txn) getVolumeState(id string) (volumeState, error) {
	data := t.tx.Bucket(bucketVolStates).Get([]byte(id))
	if data == nil {
		return volumeState{}, cloud.NewError(cloud.CodeVolumeNotFound, "volume %s not found", cloud.Quote(id))
	}
	vs, err := decodeVolumeState(data)
	if err != nil {
		return volumeState{}, fmt.Errorf("volume %s: %w", id, err)
	}
	return vs, nil
}

func (t *txn) putVolumeState(id string, st volumeState) error {
	return t.put(bucketVolStates, []byte(id), st.encode())
}

// instanceState is what attach and detach change about an instance: its revision and how
// many volumes are attached to it. Stored as two 8-byte integers.
type instanceState struct {
	revision uint64
	attached uint64
}

func (s instanceState) encode() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, s.revision)
	binary.BigEndian.PutUint64(b[8:], s.attached)
	return b
}

func decodeInstanceState(b []byte) (instanceState, error) {
	if len(b) != 16 {
		return instanceState{}, fmt.Errorf("instance state record is %d bytes, want 16", len(b))
	}
	return instanceState{revision: binary.BigEndian.Uint64(b), attached: binary.BigEndian.Uint64(b[8:])}, nil
}

func (t *txn) putInstanceState(id string, st instanceState) error {
	return t.put(bucketInstStates, []byte(id), st.encode())
}

// putAttachment adds volID to instID's attachment bucket, which the first attach creates.
func (t *txn) putAttachment(instID, volID string) error {
	t.wrote = true
	b, err := t.tx.Bucket(bucketAttach).CreateBucketIfNotExists([]byte(instID))
	if err != nil {
		return fmt.Errorf("attachment bucket of %s: %w", instID, err)
	}
	if err := b.Put([]byte(volID), []byte{}); err != nil {
		return fmt.Errorf("put attachment %s/%s: %w", instID, volID, err)
	}
	return nil
}

// deleteAttachment removes volID from instID's attachment bucket.
func (t *txn) deleteAttachment(instID, volID string) error {
	t.wrote = true
	b := t.tx.Bucket(bucketAttach).Bucket([]byte(instID))
	if b == nil {
		return nil
	}
	if err := b.Delete([]byte(volID)); err != nil {
		return fmt.Errorf("delete attachment %s/%s: %w", instID, volID, err)
	}
	return nil
}
