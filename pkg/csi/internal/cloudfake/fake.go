// Package cloudfake is the one in-memory fake of the fake cloud's API used by the unit tests of
// pkg/csi and its subpackages. It implements the method set of *cloud.Client that the driver
// uses, with the same semantics as the real server (docs/fakecloud-api.md): idempotent create by
// name, atomic attach checks (zone, single attach, instance slots, account quota), idempotent
// detach, delete refused while attached. The contract suite pkg/cloud/cloudtest runs the same
// cases against this fake and the real server (contract_test.go here and in
// pkg/cloud/server), so a difference fails a test: fix the fake, not the case. Tests can
// inject errors per operation, block an operation with a hook, and change instance limits,
// out-of-band slots and quotas.
//
// All methods are safe for concurrent use; a single mutex guards the state.
package cloudfake

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Hook runs before an operation touches the state, outside the fake's lock. A non-nil error is
// returned by the operation instead of its result. Hooks may block (to keep an operation in
// flight) and should honour ctx.
type Hook func(ctx context.Context) error

// Fake is an in-memory cloud. The zero value is not usable; call New.
type Fake struct {
	mu        sync.Mutex
	now       func() time.Time
	revision  uint64
	nextID    int
	instances map[string]*cloud.Instance
	volumes   map[string]*cloud.Volume
	snapshots map[string]*cloud.Snapshot
	// groups are the group snapshots; their members are in snapshots too.
	groups map[string]*cloud.GroupSnapshot
	quotas cloud.Quotas
	errs   map[cloud.Operation][]error
	hooks  map[cloud.Operation]Hook
	calls  map[cloud.Operation]int
	// async leaves attaches attaching and detaches detaching until Complete; started counts
	// the transitions started (a repeat that joins one starts none).
	async   bool
	started int
	// changed is closed, and forgotten, at every change of a volume's attachment or its
	// deletion, waking the WaitVolume calls (nil: nobody waits).
	changed chan struct{}
}

// Operations the cloud's fault rules do not name but the fake lets tests fail or hook.
const (
	OperationGetQuotas   cloud.Operation = "GetQuotas"
	OperationGetSnapshot cloud.Operation = "GetSnapshot"
	// OperationGetGroupSnapshot is GetGroupSnapshot, which no fault rule names either.
	OperationGetGroupSnapshot cloud.Operation = "GetGroupSnapshot"
	// OperationWaitVolume is WaitVolume (the real cloud's fault rules see it as GetVolume):
	// its own, so that tests tell a wait from a look. FailNext with cloud.ErrWaitUnsupported
	// plays an older cloud, with an error wrapping cloud.ErrWaitBusy a full one.
	OperationWaitVolume cloud.Operation = "WaitVolume"
)

// DefaultZone is the zone of volumes created without one (the real cloud's
// server.DefaultZoneName); volumes may be created in it and in the zone of any instance.
const DefaultZone = "zone-a"

// DevicePrefix is where an attached volume appears on its instance, DevicePrefix + volume ID:
// the device is the volume's own, the same at every attach (the real cloud's
// store.DevicePrefix), so the driver's publish_context is too.
const DevicePrefix = "/dev/disk/by-id/fakecloud-"

// DefaultQuotaLimit is the limit of every account quota of a new Fake, large enough not to
// matter unless a test lowers it.
const DefaultQuotaLimit = 1 << 50

// New returns an empty fake cloud with large quotas and no instances.
func New() *Fake {
	return &Fake{
		now:       time.Now,
		instances: map[string]*cloud.Instance{},
		volumes:   map[string]*cloud.Volume{},
		snapshots: map[string]*cloud.Snapshot{},
		groups:    map[string]*cloud.GroupSnapshot{},
		quotas: cloud.Quotas{
			Attachments:   cloud.Quota{Limit: DefaultQuotaLimit},
			Volumes:       cloud.Quota{Limit: DefaultQuotaLimit},
			CapacityBytes: cloud.Quota{Limit: DefaultQuotaLimit},
		},
		errs:  map[cloud.Operation][]error{},
		hooks: map[cloud.Operation]Hook{},
		calls: map[cloud.Operation]int{},
	}
}

// AddInstance creates or replaces an instance with the given zone, effective attach limit (in
// slots) and out-of-band slots, healthy.
func (f *Fake) AddInstance(id, zone string, attachLimit, outOfBandSlots int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revision++
	f.instances[id] = &cloud.Instance{
		ID: id, Zone: zone, InstanceType: "fake", AttachLimit: attachLimit, OutOfBandSlots: outOfBandSlots,
		Attachments: []string{}, Health: cloud.InstanceHealthOK, CreatedAt: f.now(), Revision: f.revision,
	}
}

// SetInstanceLimits changes an existing instance's attach limit and out-of-band slots; it
// panics when the instance does not exist (a broken test).
func (f *Fake) SetInstanceLimits(id string, attachLimit, outOfBandSlots int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.instances[id]
	if !ok {
		panic("cloudfake: no instance " + id)
	}
	f.revision++
	in.AttachLimit, in.OutOfBandSlots, in.Revision = attachLimit, outOfBandSlots, f.revision
}

// SetQuotaLimits sets the account quota limits: attachments and volumes are counts,
// capacityBytes is bytes. Use stays as it is.
func (f *Fake) SetQuotaLimits(attachments, volumes, capacityBytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revision++
	f.quotas.Attachments.Limit = attachments
	f.quotas.Volumes.Limit = volumes
	f.quotas.CapacityBytes.Limit = capacityBytes
}

// FailNext makes the next len(errs) calls of op return errs in order (after the operation's
// hook, before it touches the state).
func (f *Fake) FailNext(op cloud.Operation, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[op] = append(f.errs[op], errs...)
}

// SetHook installs h for op (nil removes it).
func (f *Fake) SetHook(op cloud.Operation, h Hook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h == nil {
		delete(f.hooks, op)
		return
	}
	f.hooks[op] = h
}

// Calls returns how many times op was called, including calls that failed.
func (f *Fake) Calls(op cloud.Operation) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Revision is the number of state changes so far; tests compare it to prove a request changed
// nothing.
func (f *Fake) Revision() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.revision
}

// Volumes returns copies of all volumes, sorted by ID.
func (f *Fake) Volumes() []cloud.Volume {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.volumesLocked()
}

// volumesLocked is a copy of every volume, sorted by ID (the real cloud's order: IDs are
// issued in creation order).
func (f *Fake) volumesLocked() []cloud.Volume {
	out := make([]cloud.Volume, 0, len(f.volumes))
	for _, v := range f.volumes {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetInstanceHealth sets an instance's health and message, as PUT /v1/instances/{id}/health
// does (it does not refuse attaches: the real cloud's refusal is tested there); false when
// there is no such instance.
func (f *Fake) SetInstanceHealth(id string, h cloud.InstanceHealth, message string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.instances[id]
	if ok {
		in.Health, in.HealthMessage = h, message
	}
	return ok
}

// SetVolumeHealth sets a volume's health and message, as PUT /v1/volumes/{id}/health does;
// false when there is no such volume.
func (f *Fake) SetVolumeHealth(id string, h cloud.VolumeHealth, message string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.volumes[id]
	if ok {
		v.Health, v.HealthMessage = h, message
	}
	return ok
}

// AddVolume stores a volume as given (ID and Name required; no state: attached or detached
// as AttachedTo says; no health: ok), for tests that need one without going through
// CreateVolume; an AttachedTo instance must exist.
func (f *Fake) AddVolume(v cloud.Volume) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revision++
	v.Revision = f.revision
	if v.AttachedTo != "" {
		in := f.instances[v.AttachedTo]
		in.Attachments = insertSorted(in.Attachments, v.ID)
		f.quotas.Attachments.Used++
		if v.State == "" {
			v.State = cloud.StateAttached
		}
	} else if v.State == "" {
		v.State = cloud.StateDetached
	}
	if v.Health == "" {
		v.Health = cloud.VolumeHealthOK
	}
	f.quotas.Volumes.Used++
	f.quotas.CapacityBytes.Used += v.SizeBytes
	f.volumes[v.ID] = &v
}

// begin counts the call, runs the hook and pops an injected error. It must be called without
// the lock held.
func (f *Fake) begin(ctx context.Context, op cloud.Operation) error {
	f.mu.Lock()
	f.calls[op]++
	h := f.hooks[op]
	f.mu.Unlock()
	if h != nil {
		if err := h(ctx); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.errs[op]; len(q) > 0 {
		f.errs[op] = q[1:]
		return q[0]
	}
	return nil
}

// lock is begin, then the fake's lock: on success the caller holds f.mu and defers its
// Unlock.
func (f *Fake) lock(ctx context.Context, op cloud.Operation) error {
	if err := f.begin(ctx, op); err != nil {
		return err
	}
	f.mu.Lock()
	return nil
}

// volumeLocked is the volume id, or cloud.ErrVolumeNotFound.
func (f *Fake) volumeLocked(id string) (*cloud.Volume, error) {
	v, ok := f.volumes[id]
	if !ok {
		return nil, cloud.NewError(cloud.CodeVolumeNotFound, "volume %s not found", id)
	}
	return v, nil
}

// instanceLocked is the instance id, or cloud.ErrInstanceNotFound.
func (f *Fake) instanceLocked(id string) (*cloud.Instance, error) {
	in, ok := f.instances[id]
	if !ok {
		return nil, cloud.NewError(cloud.CodeInstanceNotFound, "instance %s not found", id)
	}
	return in, nil
}

func (f *Fake) newID(prefix string) string {
	f.nextID++
	return fmt.Sprintf("%s-%04d", prefix, f.nextID)
}

// GetInstance returns a copy of the instance, or cloud.ErrInstanceNotFound.
func (f *Fake) GetInstance(ctx context.Context, id string) (*cloud.Instance, error) {
	if err := f.lock(ctx, cloud.OperationGetInstance); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	in, err := f.instanceLocked(id)
	if err != nil {
		return nil, err
	}
	c := *in
	c.Attachments = append([]string{}, in.Attachments...)
	// The state counts, as the store reads them with the attachments.
	capacity := f.capacityLocked(in)
	c.Attaching, c.Detaching, c.Failed = capacity.Attaching, capacity.Detaching, capacity.Failed
	return &c, nil
}

// GetCapacity returns the raw capacity facts of an instance, or cloud.ErrInstanceNotFound.
func (f *Fake) GetCapacity(ctx context.Context, instanceID string) (*cloud.Capacity, error) {
	if err := f.lock(ctx, cloud.OperationGetCapacity); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	in, err := f.instanceLocked(instanceID)
	if err != nil {
		return nil, err
	}
	return f.capacityLocked(in), nil
}

// capacityLocked is the instance's capacity facts, as the store reads them: every volume
// bound to it holds a slot, and Attaching, Detaching and Failed (a failed detach) count the
// ones in those states.
func (f *Fake) capacityLocked(in *cloud.Instance) *cloud.Capacity {
	c := &cloud.Capacity{
		InstanceID: in.ID, AttachLimit: in.AttachLimit, OutOfBandSlots: in.OutOfBandSlots,
		Attached: len(in.Attachments), QuotaHeadroom: max(0, f.quotas.Attachments.Limit-f.quotas.Attachments.Used),
		Instances: len(f.instances), Revision: f.revision, Health: in.Health, ObservedAt: f.now(),
	}
	for _, id := range in.Attachments {
		switch f.volumes[id].State {
		case cloud.StateAttaching:
			c.Attaching++
		case cloud.StateDetaching:
			c.Detaching++
		case cloud.StateError:
			c.Failed++
		}
	}
	return c
}

// GetQuotas returns the account quotas (operation OperationGetQuotas).
func (f *Fake) GetQuotas(ctx context.Context) (*cloud.Quotas, error) {
	if err := f.lock(ctx, OperationGetQuotas); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	q := f.quotas
	q.Revision = f.revision
	return &q, nil
}

// CreateVolume creates a volume, idempotent by name: the same name with the same size, zone and
// source returns the existing volume; different parameters are cloud.ErrAlreadyExists. As in
// the real cloud, a volume without a zone is in its source volume's zone, else DefaultZone,
// and the zone must be DefaultZone or an instance's (InvalidArgument). Quotas are checked
// (VolumeQuotaExceeded, CapacityQuotaExceeded) and a missing source snapshot is
// SnapshotNotFound.
func (f *Fake) CreateVolume(ctx context.Context, req cloud.CreateVolumeRequest) (*cloud.Volume, error) {
	if err := f.lock(ctx, cloud.OperationCreateVolume); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if req.Name == "" || req.SizeBytes <= 0 {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "name and a positive sizeBytes are required")
	}
	zone := req.Zone
	if zone == "" && req.SourceVolumeID != "" {
		src, err := f.volumeLocked(req.SourceVolumeID)
		if err != nil {
			return nil, err
		}
		zone = src.Zone
	}
	if zone == "" {
		zone = DefaultZone
	}
	for _, v := range f.volumes {
		if v.Name != req.Name {
			continue
		}
		if v.SizeBytes != req.SizeBytes || v.Zone != zone || v.SourceSnapshotID != req.SourceSnapshotID || v.SourceVolumeID != req.SourceVolumeID {
			return nil, cloud.NewError(cloud.CodeAlreadyExists, "volume %s exists with other parameters", req.Name)
		}
		c := *v
		return &c, nil
	}
	if !f.zoneKnownLocked(zone) {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "create volume: unknown zone %s: no instance is in it", cloud.Quote(zone))
	}
	if req.SourceSnapshotID != "" {
		s, ok := f.snapshots[req.SourceSnapshotID]
		if !ok {
			return nil, cloud.NewError(cloud.CodeSnapshotNotFound, "snapshot %s not found", req.SourceSnapshotID)
		}
		if s.SizeBytes > req.SizeBytes {
			return nil, cloud.NewError(cloud.CodeInvalidArgument, "volume smaller than its snapshot")
		}
	}
	if req.SourceVolumeID != "" {
		src, err := f.volumeLocked(req.SourceVolumeID)
		switch {
		case err != nil:
			return nil, err
		case zone != src.Zone:
			return nil, cloud.NewError(cloud.CodeInvalidArgument, "clone of %s must be in zone %s", src.ID, src.Zone)
		case req.SizeBytes < src.SizeBytes:
			return nil, cloud.NewError(cloud.CodeInvalidArgument, "clone smaller than its source")
		}
	}
	if f.quotas.Volumes.Used+1 > f.quotas.Volumes.Limit {
		return nil, cloud.NewError(cloud.CodeVolumeQuotaExceeded, "volume quota %d reached", f.quotas.Volumes.Limit)
	}
	if f.quotas.CapacityBytes.Used+req.SizeBytes > f.quotas.CapacityBytes.Limit {
		return nil, cloud.NewError(cloud.CodeCapacityQuotaExceeded, "capacity quota %d bytes reached", f.quotas.CapacityBytes.Limit)
	}
	f.revision++
	v := &cloud.Volume{
		ID: f.newID("vol"), Name: req.Name, SizeBytes: req.SizeBytes, Zone: zone,
		SourceSnapshotID: req.SourceSnapshotID, SourceVolumeID: req.SourceVolumeID, State: cloud.StateDetached,
		Health: cloud.VolumeHealthOK, CreatedAt: f.now(), Revision: f.revision,
	}
	f.volumes[v.ID] = v
	f.quotas.Volumes.Used++
	f.quotas.CapacityBytes.Used += v.SizeBytes
	c := *v
	return &c, nil
}

// zoneKnownLocked reports whether volumes may be created in zone: DefaultZone or the zone of
// an instance, as in the real cloud (zones come with their instances).
func (f *Fake) zoneKnownLocked(zone string) bool {
	if zone == DefaultZone {
		return true
	}
	for _, in := range f.instances {
		if in.Zone == zone {
			return true
		}
	}
	return false
}

// GetVolume returns a copy of the volume, or cloud.ErrVolumeNotFound.
func (f *Fake) GetVolume(ctx context.Context, id string) (*cloud.Volume, error) {
	if err := f.lock(ctx, cloud.OperationGetVolume); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	v, err := f.volumeLocked(id)
	if err != nil {
		return nil, err
	}
	c := *v
	return &c, nil
}

// WaitVolume returns the volume once it is no longer attaching (w.For: attached) or
// detaching (w.For: detached) to w.InstanceID, which it may be at once, or as it still is
// after w.Timeout (at most cloud.MaxWaitMS ms), as the real cloud's wait does. Errors:
// VolumeNotFound (also when deleted during the wait), InvalidArgument for another w.For,
// the context's error when ctx ends first.
func (f *Fake) WaitVolume(ctx context.Context, id string, w cloud.VolumeWait) (*cloud.Volume, error) {
	from := cloud.StateAttaching
	switch w.For {
	case cloud.StateAttached:
	case cloud.StateDetached:
		from = cloud.StateDetaching
	default:
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "wait for %q: want attached or detached", w.For)
	}
	if err := f.begin(ctx, OperationWaitVolume); err != nil {
		return nil, err
	}
	timer := time.NewTimer(min(max(w.Timeout, 0), cloud.MaxWaitMS*time.Millisecond))
	defer timer.Stop()
	for {
		f.mu.Lock()
		v, err := f.volumeLocked(id)
		if err != nil {
			f.mu.Unlock()
			return nil, err
		}
		c := *v
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		changed := f.changed
		f.mu.Unlock()
		if c.State != from || c.AttachedTo != w.InstanceID {
			return &c, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return &c, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", OperationWaitVolume, ctx.Err())
		}
	}
}

// notifyLocked wakes the WaitVolume calls: a volume's attachment changed or it went.
func (f *Fake) notifyLocked() {
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

// pageBounds turns a page token (a decimal offset) and a page size (0: 100) into slice bounds;
// a malformed or out-of-range token is cloud.ErrInvalidArgument, like the real server.
func pageBounds(n, maxResults int, token string) (int, int, string, error) {
	start := 0
	if token != "" {
		s, err := strconv.Atoi(token)
		if err != nil || s < 0 || s > n {
			return 0, 0, "", cloud.NewError(cloud.CodeInvalidArgument, "bad page token %q", token)
		}
		start = s
	}
	if maxResults <= 0 {
		maxResults = 100
	}
	end := min(n, start+maxResults)
	next := ""
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next, nil
}

// ListVolumes returns one page of volumes sorted by ID; page tokens are opaque offsets.
func (f *Fake) ListVolumes(ctx context.Context, maxResults int, pageToken string) (*cloud.VolumeList, error) {
	if err := f.lock(ctx, cloud.OperationListVolumes); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	all := f.volumesLocked()
	start, end, next, err := pageBounds(len(all), maxResults, pageToken)
	if err != nil {
		return nil, err
	}
	return &cloud.VolumeList{Volumes: all[start:end], NextPageToken: next}, nil
}

// DeleteVolume deletes a volume: cloud.ErrVolumeNotFound when missing, cloud.ErrVolumeInUse
// when attached.
func (f *Fake) DeleteVolume(ctx context.Context, id string) error {
	if err := f.lock(ctx, cloud.OperationDeleteVolume); err != nil {
		return err
	}
	defer f.mu.Unlock()
	v, err := f.volumeLocked(id)
	if err != nil {
		return err
	}
	if v.AttachedTo != "" {
		return cloud.NewError(cloud.CodeVolumeInUse, "volume %s is attached to %s", id, v.AttachedTo)
	}
	f.revision++
	delete(f.volumes, id)
	f.notifyLocked()
	f.quotas.Volumes.Used--
	f.quotas.CapacityBytes.Used -= v.SizeBytes
	return nil
}

// AttachVolume attaches a volume to an instance atomically; idempotent for the same instance.
// Errors: InstanceNotFound (checked first), VolumeNotFound, ZoneMismatch, VolumeInUse (attached elsewhere),
// AttachmentLimitExceeded (attached + out-of-band ≥ limit), AttachmentQuotaExceeded.
func (f *Fake) AttachVolume(ctx context.Context, volumeID, instanceID string) (*cloud.Attachment, error) {
	return f.Attach(ctx, volumeID, cloud.AttachRequest{InstanceID: instanceID})
}

// Attach is AttachVolume in the request's mode: req.ReadOnly attaches read-only, and an
// attaching or attached volume of the same instance in the other mode is AlreadyExists, as
// the real cloud answers.
func (f *Fake) Attach(ctx context.Context, volumeID string, req cloud.AttachRequest) (*cloud.Attachment, error) {
	instanceID := req.InstanceID
	if err := f.lock(ctx, cloud.OperationAttachVolume); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	// The instance first, as the real cloud checks.
	in, err := f.instanceLocked(instanceID)
	if err != nil {
		return nil, err
	}
	v, err := f.volumeLocked(volumeID)
	if err != nil {
		return nil, err
	}
	if v.AttachedTo == instanceID {
		if v.State == cloud.StateDetaching {
			return nil, cloud.NewError(cloud.CodeIncorrectState, "volume %s is detaching from %s", volumeID, instanceID)
		}
		if (v.State == cloud.StateAttaching || v.State == cloud.StateAttached) && v.ReadOnly != req.ReadOnly {
			return nil, cloud.NewError(cloud.CodeAlreadyExists, "volume %s is %s to %s with readOnly=%v", volumeID, v.State, instanceID, v.ReadOnly)
		}
		return attachmentOf(v, in.ID), nil
	}
	if v.AttachedTo != "" {
		return nil, cloud.NewError(cloud.CodeVolumeInUse, "volume %s is attached to %s", volumeID, v.AttachedTo)
	}
	if v.Zone != in.Zone {
		return nil, cloud.NewError(cloud.CodeZoneMismatch, "volume zone %s, instance zone %s", v.Zone, in.Zone)
	}
	if f.capacityLocked(in).FreeSlots() <= 0 {
		return nil, cloud.NewError(cloud.CodeAttachmentLimitExceeded, "instance %s has no free slot", instanceID)
	}
	if f.quotas.Attachments.Used >= f.quotas.Attachments.Limit {
		return nil, cloud.NewError(cloud.CodeAttachmentQuotaExceeded, "attachment quota %d reached", f.quotas.Attachments.Limit)
	}
	f.revision++
	in.Attachments = insertSorted(in.Attachments, v.ID)
	in.Revision = f.revision
	f.quotas.Attachments.Used++
	v.AttachedTo = instanceID
	v.Device = DevicePrefix + v.ID
	v.ReadOnly = req.ReadOnly
	v.Revision = f.revision
	v.State, v.ErrorCode, v.ErrorMessage = cloud.StateAttached, "", ""
	f.started++
	if f.async {
		v.State = cloud.StateAttaching
	}
	f.notifyLocked()
	return attachmentOf(v, in.ID), nil
}

// SetAsync makes attaches stay attaching and detaches detaching (holding their slots) until
// Complete, like the real cloud with non-zero durations; off (the default), they complete
// within the call.
func (f *Fake) SetAsync(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.async = on
}

// TransitionsStarted is how many attaches and detaches started a transition; a repeat that
// joins one under way starts none.
func (f *Fake) TransitionsStarted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started
}

// Complete ends every transition under way and returns how many: attaching volumes become
// attached, detaching ones detached (releasing their slots). With fail set they end in
// state error with that code instead: a failed attach releases its slot, a failed detach
// keeps it.
func (f *Fake) Complete(fail cloud.Code) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notifyLocked()
	n := 0
	for _, v := range f.volumes {
		if !v.State.Transient() {
			continue
		}
		n++
		f.revision++
		v.Revision = f.revision
		attaching := v.State == cloud.StateAttaching
		switch {
		case fail != "":
			v.State, v.ErrorCode, v.ErrorMessage = cloud.StateError, fail, "failed by the fake"
			v.ReadOnly = false
			if attaching {
				f.releaseLocked(v)
			}
		case attaching:
			v.State = cloud.StateAttached
		default:
			f.releaseLocked(v)
			v.State = cloud.StateDetached
		}
	}
	return n
}

// releaseLocked unbinds v from its instance, giving back the slot and the quota.
func (f *Fake) releaseLocked(v *cloud.Volume) {
	if in, ok := f.instances[v.AttachedTo]; ok {
		in.Attachments = removeSorted(in.Attachments, v.ID)
		in.Revision = f.revision
	}
	f.quotas.Attachments.Used--
	v.AttachedTo, v.Device, v.ReadOnly = "", "", false
}

// DetachVolume detaches a volume from an instance; detaching what is not attached there is a
// no-op, also from an instance that does not exist. Errors: VolumeNotFound.
func (f *Fake) DetachVolume(ctx context.Context, volumeID, instanceID string) (*cloud.Attachment, error) {
	if err := f.lock(ctx, cloud.OperationDetachVolume); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	v, err := f.volumeLocked(volumeID)
	if err != nil {
		return nil, err
	}
	if v.AttachedTo != instanceID {
		// Detached there, whether or not the instance exists, as the real cloud answers.
		return &cloud.Attachment{VolumeID: volumeID, InstanceID: instanceID, State: cloud.StateDetached, Revision: f.revision}, nil
	}
	if v.State == cloud.StateDetaching {
		return attachmentOf(v, instanceID), nil
	}
	f.revision++
	f.started++
	v.Revision = f.revision
	f.notifyLocked()
	if f.async {
		v.State = cloud.StateDetaching
		return attachmentOf(v, instanceID), nil
	}
	f.releaseLocked(v)
	v.State = cloud.StateDetached
	return attachmentOf(v, instanceID), nil
}

// ResizeVolume grows a volume to sizeBytes; shrinking is cloud.ErrInvalidArgument, the same
// size is a no-op, growth past the capacity quota is CapacityQuotaExceeded.
func (f *Fake) ResizeVolume(ctx context.Context, volumeID string, sizeBytes int64) (*cloud.Volume, error) {
	if err := f.lock(ctx, cloud.OperationResizeVolume); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	v, err := f.volumeLocked(volumeID)
	if err != nil {
		return nil, err
	}
	if sizeBytes < v.SizeBytes {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "volumes only grow")
	}
	if sizeBytes > v.SizeBytes {
		if f.quotas.CapacityBytes.Used+sizeBytes-v.SizeBytes > f.quotas.CapacityBytes.Limit {
			return nil, cloud.NewError(cloud.CodeCapacityQuotaExceeded, "capacity quota reached")
		}
		f.revision++
		f.quotas.CapacityBytes.Used += sizeBytes - v.SizeBytes
		v.SizeBytes, v.Revision = sizeBytes, f.revision
	}
	c := *v
	return &c, nil
}

// ModifyVolume sets a volume's type and IOPS as the cloud does (cloud.CheckVolumeParameters);
// the same values change nothing.
func (f *Fake) ModifyVolume(ctx context.Context, volumeID string, req cloud.ModifyVolumeRequest) (*cloud.Volume, error) {
	if err := f.lock(ctx, cloud.OperationModifyVolume); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	v, err := f.volumeLocked(volumeID)
	if err != nil {
		return nil, err
	}
	typ, iops, changed, err := req.Apply(v.Type, v.IOPS)
	if err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "%v", err)
	}
	if changed {
		f.revision++
		v.Type, v.IOPS, v.Revision = typ, iops, f.revision
	}
	c := *v
	return &c, nil
}

// CreateSnapshot snapshots a volume, idempotent by name (same source: the existing snapshot;
// other source: AlreadyExists). A missing source is VolumeNotFound.
func (f *Fake) CreateSnapshot(ctx context.Context, req cloud.CreateSnapshotRequest) (*cloud.Snapshot, error) {
	if err := f.lock(ctx, cloud.OperationCreateSnapshot); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	for _, s := range f.snapshots {
		// A group's members are not in the real cloud's name index.
		if s.Name != req.Name || s.GroupSnapshotID != "" {
			continue
		}
		if s.SourceVolumeID != req.SourceVolumeID {
			return nil, cloud.NewError(cloud.CodeAlreadyExists, "snapshot %s exists for another volume", req.Name)
		}
		c := *s
		return &c, nil
	}
	v, err := f.volumeLocked(req.SourceVolumeID)
	if err != nil {
		return nil, err
	}
	f.revision++
	s := &cloud.Snapshot{
		ID: f.newID("snap"), Name: req.Name, SourceVolumeID: v.ID, SizeBytes: v.SizeBytes,
		ReadyToUse: true, CreatedAt: f.now(), Revision: f.revision,
	}
	f.snapshots[s.ID] = s
	c := *s
	return &c, nil
}

// GetSnapshot returns a copy of the snapshot, or cloud.ErrSnapshotNotFound.
func (f *Fake) GetSnapshot(ctx context.Context, id string) (*cloud.Snapshot, error) {
	if err := f.lock(ctx, OperationGetSnapshot); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	s, ok := f.snapshots[id]
	if !ok {
		return nil, cloud.NewError(cloud.CodeSnapshotNotFound, "snapshot %s not found", id)
	}
	c := *s
	return &c, nil
}

// ListSnapshots returns one page of snapshots sorted by ID, filtered by ID and source volume.
func (f *Fake) ListSnapshots(ctx context.Context, opts cloud.ListSnapshotsOptions) (*cloud.SnapshotList, error) {
	if err := f.lock(ctx, cloud.OperationListSnapshots); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	all := []cloud.Snapshot{}
	for _, s := range f.snapshots {
		if (opts.SnapshotID == "" || s.ID == opts.SnapshotID) && (opts.SourceVolumeID == "" || s.SourceVolumeID == opts.SourceVolumeID) {
			all = append(all, *s)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	start, end, next, err := pageBounds(len(all), opts.MaxResults, opts.PageToken)
	if err != nil {
		return nil, err
	}
	return &cloud.SnapshotList{Snapshots: all[start:end], NextPageToken: next}, nil
}

// DeleteSnapshot deletes a snapshot, or returns cloud.ErrSnapshotNotFound.
func (f *Fake) DeleteSnapshot(ctx context.Context, id string) error {
	if err := f.lock(ctx, cloud.OperationDeleteSnapshot); err != nil {
		return err
	}
	defer f.mu.Unlock()
	s, ok := f.snapshots[id]
	if !ok {
		return cloud.NewError(cloud.CodeSnapshotNotFound, "snapshot %s not found", id)
	}
	if s.GroupSnapshotID != "" {
		return cloud.NewError(cloud.CodeSnapshotInGroup, "snapshot %s is a member of group snapshot %s", id, s.GroupSnapshotID)
	}
	f.revision++
	delete(f.snapshots, id)
	return nil
}

// groupLocked is a deep copy of the group id with its members as they are, or
// cloud.ErrGroupSnapshotNotFound.
func (f *Fake) groupLocked(id string) (*cloud.GroupSnapshot, error) {
	g, ok := f.groups[id]
	if !ok {
		return nil, cloud.NewError(cloud.CodeGroupSnapshotNotFound, "group snapshot %s not found", id)
	}
	c := *g
	c.SourceVolumeIDs = slices.Clone(g.SourceVolumeIDs)
	c.Snapshots = make([]cloud.Snapshot, 0, len(g.Snapshots))
	for _, m := range g.Snapshots {
		c.Snapshots = append(c.Snapshots, *f.snapshots[m.ID])
	}
	return &c, nil
}

// CreateGroupSnapshot snapshots the volumes together, as the real cloud does: idempotent by
// name (same set of volumes in any order: the existing group; another set: AlreadyExists),
// all members at one revision and time, volumes in one zone (else ZoneMismatch), checked by
// cloud.CreateGroupSnapshotRequest.Check.
func (f *Fake) CreateGroupSnapshot(ctx context.Context, req cloud.CreateGroupSnapshotRequest) (*cloud.GroupSnapshot, error) {
	ids, err := req.Check()
	if err != nil {
		return nil, err
	}
	if err := f.lock(ctx, cloud.OperationCreateGroupSnapshot); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	for _, g := range f.groups {
		if g.Name != req.Name {
			continue
		}
		if !slices.Equal(g.SourceVolumeIDs, ids) {
			return nil, cloud.NewError(cloud.CodeAlreadyExists, "group snapshot %s exists for other volumes", req.Name)
		}
		return f.groupLocked(g.ID)
	}
	vols := make([]*cloud.Volume, 0, len(ids))
	for _, id := range ids {
		v, err := f.volumeLocked(id)
		if err != nil {
			return nil, err
		}
		if len(vols) > 0 && v.Zone != vols[0].Zone {
			return nil, cloud.NewError(cloud.CodeZoneMismatch, "volumes %s (%s) and %s (%s) are in different zones", vols[0].ID, vols[0].Zone, v.ID, v.Zone)
		}
		vols = append(vols, v)
	}
	f.revision++
	now := f.now()
	g := &cloud.GroupSnapshot{ID: f.newID("gsnap"), Name: req.Name, SourceVolumeIDs: ids, ReadyToUse: true, CreatedAt: now, Revision: f.revision}
	for _, v := range vols {
		s := &cloud.Snapshot{ID: f.newID("snap"), Name: req.Name + "/" + v.ID, SourceVolumeID: v.ID, SizeBytes: v.SizeBytes,
			ReadyToUse: true, CreatedAt: now, Revision: f.revision, GroupSnapshotID: g.ID}
		f.snapshots[s.ID] = s
		g.Snapshots = append(g.Snapshots, *s)
	}
	f.groups[g.ID] = g
	return f.groupLocked(g.ID)
}

// GetGroupSnapshot returns a copy of the group with its members, or
// cloud.ErrGroupSnapshotNotFound.
func (f *Fake) GetGroupSnapshot(ctx context.Context, id string) (*cloud.GroupSnapshot, error) {
	if err := f.lock(ctx, OperationGetGroupSnapshot); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	return f.groupLocked(id)
}

// DeleteGroupSnapshot deletes the group and its members, or returns
// cloud.ErrGroupSnapshotNotFound.
func (f *Fake) DeleteGroupSnapshot(ctx context.Context, id string) error {
	if err := f.lock(ctx, cloud.OperationDeleteGroupSnapshot); err != nil {
		return err
	}
	defer f.mu.Unlock()
	g, ok := f.groups[id]
	if !ok {
		return cloud.NewError(cloud.CodeGroupSnapshotNotFound, "group snapshot %s not found", id)
	}
	f.revision++
	for _, m := range g.Snapshots {
		delete(f.snapshots, m.ID)
	}
	delete(f.groups, id)
	return nil
}

// attachmentOf is the attachment of v to instanceID as the volume stands.
func attachmentOf(v *cloud.Volume, instanceID string) *cloud.Attachment {
	return &cloud.Attachment{VolumeID: v.ID, InstanceID: instanceID, Device: v.Device, State: v.State, ReadOnly: v.ReadOnly, Revision: v.Revision}
}

func insertSorted(s []string, v string) []string {
	i := sort.SearchStrings(s, v)
	if i < len(s) && s[i] == v {
		return s
	}
	s = append(s, "")
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

func removeSorted(s []string, v string) []string {
	i := sort.SearchStrings(s, v)
	if i < len(s) && s[i] == v {
		return append(s[:i], s[i+1:]...)
	}
	return s
}
