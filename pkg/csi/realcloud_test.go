package csi

// The real fake cloud (pkg/cloud/server), started in process for the unit
// tests of pkg/csi, so that they run against the cloud's own rules instead of a copy of them:
// a server whose store does not fsync (no data dir), serving HTTP on a loopback port, with
// transitions that complete within the request unless a test holds them, and a real
// cloud.Client in front of it.
//
// realCloud wraps that client with what tests need besides: counting calls, hooks that block or
// fail a call before it is sent, and admin shortcuts (instances, limits, quotas, health, fault
// rules, held transitions). Failures with a cloud code on an operation the cloud's fault rules
// name go through the cloud's fault API, so the answer is the real cloud's; other errors
// (a context error, a wrapped sentinel, an operation no rule names) are returned by the
// wrapper without a request.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// Operations the cloud's fault rules do not name but tests fail or hook in the wrapper.
const (
	cloudOpGetQuotas        cloud.Operation = "GetQuotas"
	cloudOpGetSnapshot      cloud.Operation = "GetSnapshot"
	cloudOpGetGroupSnapshot cloud.Operation = "GetGroupSnapshot"
	// cloudOpWaitVolume is WaitVolume (the cloud's fault rules see it as GetVolume): its
	// own here, so that tests tell a wait from a look.
	cloudOpWaitVolume cloud.Operation = "WaitVolume"
)

// realCloudZone is the zone of volumes created without one (server.DefaultZoneName).
const realCloudZone = server.DefaultZoneName

// realCloudInstanceType is the one instance type; AddInstance overrides its limit per instance.
const realCloudInstanceType = "test"

// realCloudMaxSlots is the instance type's maxAttachments.
const realCloudMaxSlots = 64

// cloudHook runs before a call is sent; a non-nil error is the call's answer. Hooks may block (to
// keep a call in flight) and should honour ctx.
type cloudHook func(ctx context.Context) error

// realCloud is a running real fake cloud and a driver client of it, with the test controls.
// It implements the method set pkg/csi's cloud interfaces ask for.
type realCloud struct {
	t      testing.TB
	client *cloud.Client
	admin  *admin.Client

	mu    sync.Mutex
	calls map[cloud.Operation]int
	hooks map[cloud.Operation]cloudHook
	errs  map[cloud.Operation][]error
	// hold is the IDs of the transition rules that hold attaches and detaches (nil: none).
	hold []string
}

// newRealCloud starts a fake cloud with no instances and the largest quotas; it stops in
// t.Cleanup.
func newRealCloud(t testing.TB) *realCloud {
	t.Helper()
	const driverToken, adminToken = "driver-token", "admin-token"
	// The largest quotas the cloud takes, not to matter unless a test lowers them.
	limits := &store.Limits{Attachments: cloud.MaxQuotaCount, Volumes: cloud.MaxQuotaCount, CapacityBytes: cloud.MaxQuotaBytes}
	// The cloud's request log would drown the test's own output.
	quiet := klog.Logger{}
	srv, err := server.New(server.Config{
		Logger: &quiet,
		Seed:   server.Seed{InstanceTypes: []cloud.InstanceType{{Name: realCloudInstanceType, MaxAttachments: realCloudMaxSlots}}, Quotas: limits},
		Tokens: []server.Token{{Token: driverToken, Role: server.RoleDriver}, {Token: adminToken, Role: server.RoleAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fake cloud Serve: %v", err)
		}
		_ = srv.Close()
	})
	url := "http://" + ln.Addr().String()
	c := &realCloud{t: t, calls: map[cloud.Operation]int{}, hooks: map[cloud.Operation]cloudHook{}, errs: map[cloud.Operation][]error{}}
	if c.client, err = cloud.NewClient(url, cloud.WithToken(driverToken)); err != nil {
		t.Fatal(err)
	}
	if c.admin, err = admin.NewClient(url, cloud.WithToken(adminToken)); err != nil {
		t.Fatal(err)
	}
	return c
}

// Admin is an admin client of the cloud, for what the shortcuts do not cover.
func (c *realCloud) Admin() *admin.Client { return c.admin }

// must fails the test on err from an admin call.
func (c *realCloud) must(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("fake cloud admin: %v", err)
	}
}

// AddInstance creates an instance in zone with the given attach limit and out-of-band slots
// (both in slots, 1 ≤ attachLimit ≤ 64), healthy.
func (c *realCloud) AddInstance(id, zone string, attachLimit, outOfBandSlots int) {
	c.t.Helper()
	ctx := context.Background()
	_, err := c.admin.CreateInstance(ctx, cloud.CreateInstanceRequest{ID: id, Zone: zone, InstanceType: realCloudInstanceType})
	c.must(err)
	c.SetInstanceLimits(id, attachLimit, outOfBandSlots)
}

// SetInstanceLimits changes an instance's attach limit and out-of-band slots.
func (c *realCloud) SetInstanceLimits(id string, attachLimit, outOfBandSlots int) {
	c.t.Helper()
	_, err := c.admin.PatchInstance(context.Background(), id, cloud.InstancePatch{AttachLimit: &attachLimit, OutOfBandSlots: &outOfBandSlots})
	c.must(err)
}

// SetQuotaLimits sets the account quota limits: attachments and volumes are counts,
// capacityBytes is bytes.
func (c *realCloud) SetQuotaLimits(attachments, volumes, capacityBytes int64) {
	c.t.Helper()
	_, err := c.admin.PatchQuotas(context.Background(), cloud.QuotasPatch{Attachments: &attachments, Volumes: &volumes, CapacityBytes: &capacityBytes})
	c.must(err)
}

// SetInstanceHealth sets an instance's health through the admin API; false when there is no
// such instance.
func (c *realCloud) SetInstanceHealth(id string, h cloud.InstanceHealth, message string) bool {
	c.t.Helper()
	_, err := c.admin.SetInstanceHealth(context.Background(), id, h, message)
	if cloud.CodeOf(err) == cloud.CodeInstanceNotFound {
		return false
	}
	c.must(err)
	return true
}

// SetVolumeHealth sets a volume's health through the admin API; false when there is no such
// volume.
func (c *realCloud) SetVolumeHealth(id string, h cloud.VolumeHealth, message string) bool {
	c.t.Helper()
	_, err := c.admin.SetVolumeHealth(context.Background(), id, h, message)
	if cloud.CodeOf(err) == cloud.CodeVolumeNotFound {
		return false
	}
	c.must(err)
	return true
}

// Volumes is every volume, in ID order (creation order).
func (c *realCloud) Volumes() []cloud.Volume {
	c.t.Helper()
	var out []cloud.Volume
	token := ""
	for {
		page, err := c.admin.ListVolumes(context.Background(), 0, token)
		c.must(err)
		out = append(out, page.Volumes...)
		if token = page.NextPageToken; token == "" {
			return out
		}
	}
}

// Revision is the cloud's global revision: tests compare it to prove a request changed
// nothing.
func (c *realCloud) Revision() uint64 {
	c.t.Helper()
	events, err := c.admin.ListEvents(context.Background(), 0)
	c.must(err)
	if len(events) == 0 {
		return 0
	}
	return events[len(events)-1].Revision
}

// FailNext makes the next len(errs) calls of op answer errs in order. A *cloud.Error on an
// operation the cloud's fault rules name becomes a fault rule (the cloud answers with its
// code); any other error is returned by the wrapper.
func (c *realCloud) FailNext(op cloud.Operation, errs ...error) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs[op] = append(c.errs[op], errs...)
}

// SetHook installs h for op (nil removes it).
func (c *realCloud) SetHook(op cloud.Operation, h cloudHook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h == nil {
		delete(c.hooks, op)
		return
	}
	c.hooks[op] = h
}

// Calls is how many times op was called, failed calls included.
func (c *realCloud) Calls(op cloud.Operation) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// SetAsync holds attaches and detaches in attaching and detaching (with their slots) until
// Complete, by fault rules of kind stick; off, it releases them and transitions complete within
// the request again.
func (c *realCloud) SetAsync(on bool) {
	c.t.Helper()
	c.setHold(on, "")
}

// FailTransitions is SetAsync(true) whose held transitions end in state error with code
// when Complete releases them (a failed attach gives back its slot, a failed detach keeps it).
func (c *realCloud) FailTransitions(code cloud.Code) {
	c.t.Helper()
	c.setHold(true, code)
}

// setHold deletes the hold rules, and with on installs new ones whose transitions end with
// fail ("" succeeds) once released.
func (c *realCloud) setHold(on bool, fail cloud.Code) {
	c.t.Helper()
	ctx := context.Background()
	c.mu.Lock()
	old := c.hold
	c.hold = nil
	c.mu.Unlock()
	for _, id := range old {
		c.must(c.admin.DeleteFault(ctx, id))
	}
	if !on {
		return
	}
	var ids []string
	for _, op := range []cloud.Operation{cloud.OperationAttachVolume, cloud.OperationDetachVolume} {
		// A stick and a fail rule that fire together hold the transition while the fail rule
		// lives, then fail it.
		r := cloud.FaultRule{Operation: op, Transition: cloud.TransitionStick}
		if fail != "" {
			r = cloud.FaultRule{Operation: op, Transition: cloud.TransitionFail, Error: fail}
			stick, err := c.admin.CreateFault(ctx, cloud.FaultRule{Operation: op, Transition: cloud.TransitionStick})
			c.must(err)
			ids = append(ids, stick.ID)
		}
		rule, err := c.admin.CreateFault(ctx, r)
		c.must(err)
		ids = append(ids, rule.ID)
	}
	c.mu.Lock()
	c.hold = ids
	c.mu.Unlock()
}

// Complete ends every held transition (with the code of FailTransitions, if any) and returns
// how many there were, once none is left; transitions started later are held again (without
// a failure code).
func (c *realCloud) Complete() int {
	c.t.Helper()
	held := 0
	for _, v := range c.Volumes() {
		if v.State.Transient() {
			held++
		}
	}
	c.mu.Lock()
	on := c.hold != nil
	c.mu.Unlock()
	c.setHold(false, "")
	deadline := time.Now().Add(10 * time.Second)
	for slices.ContainsFunc(c.Volumes(), func(v cloud.Volume) bool { return v.State.Transient() }) {
		if time.Now().After(deadline) {
			c.t.Fatalf("fake cloud: transitions still under way 10 s after their release")
		}
		time.Sleep(time.Millisecond)
	}
	if on {
		c.setHold(true, "")
	}
	return held
}

// TransitionsStarted is how many attaches and detaches started a transition; a repeat that
// joins one under way, or answers at once, starts none.
func (c *realCloud) TransitionsStarted() int {
	c.t.Helper()
	events, err := c.admin.ListEvents(context.Background(), 0)
	c.must(err)
	// A transition the cloud completes within the request logs only its end.
	n, pending := 0, map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case "VolumeAttaching", "VolumeDetaching":
			n++
			pending[e.VolumeID] = true
		case "VolumeAttached", "VolumeDetached", "VolumeAttachFailed", "VolumeDetachFailed":
			if !pending[e.VolumeID] {
				n++
			}
			pending[e.VolumeID] = false
		}
	}
	return n
}

// faultableOp is whether the cloud's fault rules can target op.
func faultableOp(op cloud.Operation) bool { return slices.Contains(faults.Operations(), op) }

// begin counts the call, runs op's hook and takes the next injected error: a *cloud.Error on
// a faultableOp operation becomes a fault rule firing once on the request about to be sent
// (the call's answer is then the cloud's), anything else is returned here.
func (c *realCloud) begin(ctx context.Context, op cloud.Operation) error {
	c.mu.Lock()
	c.calls[op]++
	h := c.hooks[op]
	c.mu.Unlock()
	if h != nil {
		if err := h(ctx); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	c.mu.Lock()
	q := c.errs[op]
	if len(q) == 0 {
		c.mu.Unlock()
		return nil
	}
	err := q[0]
	c.errs[op] = q[1:]
	c.mu.Unlock()
	var ce *cloud.Error
	if !faultableOp(op) || !errors.As(err, &ce) || ce.Code == "" || err != error(ce) { //nolint:errorlint // identity: only a bare *cloud.Error, not a wrapped one
		return err
	}
	_, ferr := c.admin.CreateFault(ctx, cloud.FaultRule{Operation: op, Error: ce.Code, Count: 1})
	if ferr != nil {
		return fmt.Errorf("cloudreal: inject %s on %s: %w", ce.Code, op, ferr)
	}
	return nil
}

// call is one call of op through the real client: counted, hooked, maybe failed by begin.
func call[T any](ctx context.Context, c *realCloud, op cloud.Operation, do func() (T, error)) (T, error) {
	if err := c.begin(ctx, op); err != nil {
		var zero T
		return zero, err
	}
	return do()
}

// GetInstance is cloud.Client.GetInstance.
func (c *realCloud) GetInstance(ctx context.Context, id string) (*cloud.Instance, error) {
	return call(ctx, c, cloud.OperationGetInstance, func() (*cloud.Instance, error) { return c.client.GetInstance(ctx, id) })
}

// GetCapacity is cloud.Client.GetCapacity.
func (c *realCloud) GetCapacity(ctx context.Context, instanceID string) (*cloud.Capacity, error) {
	return call(ctx, c, cloud.OperationGetCapacity, func() (*cloud.Capacity, error) { return c.client.GetCapacity(ctx, instanceID) })
}

// GetQuotas is cloud.Client.GetQuotas (operation cloudOpGetQuotas).
func (c *realCloud) GetQuotas(ctx context.Context) (*cloud.Quotas, error) {
	return call(ctx, c, cloudOpGetQuotas, func() (*cloud.Quotas, error) { return c.client.GetQuotas(ctx) })
}

// CreateVolume is cloud.Client.CreateVolume.
func (c *realCloud) CreateVolume(ctx context.Context, req cloud.CreateVolumeRequest) (*cloud.Volume, error) {
	return call(ctx, c, cloud.OperationCreateVolume, func() (*cloud.Volume, error) { return c.client.CreateVolume(ctx, req) })
}

// GetVolume is cloud.Client.GetVolume.
func (c *realCloud) GetVolume(ctx context.Context, id string) (*cloud.Volume, error) {
	return call(ctx, c, cloud.OperationGetVolume, func() (*cloud.Volume, error) { return c.client.GetVolume(ctx, id) })
}

// WaitVolume is cloud.Client.WaitVolume (operation cloudOpWaitVolume).
func (c *realCloud) WaitVolume(ctx context.Context, id string, w cloud.VolumeWait) (*cloud.Volume, error) {
	return call(ctx, c, cloudOpWaitVolume, func() (*cloud.Volume, error) { return c.client.WaitVolume(ctx, id, w) })
}

// ListVolumes is cloud.Client.ListVolumes.
func (c *realCloud) ListVolumes(ctx context.Context, maxResults int, pageToken string) (*cloud.VolumeList, error) {
	return call(ctx, c, cloud.OperationListVolumes, func() (*cloud.VolumeList, error) { return c.client.ListVolumes(ctx, maxResults, pageToken) })
}

// DeleteVolume is cloud.Client.DeleteVolume.
func (c *realCloud) DeleteVolume(ctx context.Context, id string) error {
	_, err := call(ctx, c, cloud.OperationDeleteVolume, func() (struct{}, error) { return struct{}{}, c.client.DeleteVolume(ctx, id) })
	return err
}

// AttachVolume is cloud.Client.AttachVolume (operation AttachVolume).
func (c *realCloud) AttachVolume(ctx context.Context, volumeID, instanceID string) (*cloud.Attachment, error) {
	return c.Attach(ctx, volumeID, cloud.AttachRequest{InstanceID: instanceID})
}

// Attach is cloud.Client.Attach (operation AttachVolume).
func (c *realCloud) Attach(ctx context.Context, volumeID string, req cloud.AttachRequest) (*cloud.Attachment, error) {
	return call(ctx, c, cloud.OperationAttachVolume, func() (*cloud.Attachment, error) { return c.client.Attach(ctx, volumeID, req) })
}

// DetachVolume is cloud.Client.DetachVolume.
func (c *realCloud) DetachVolume(ctx context.Context, volumeID, instanceID string) (*cloud.Attachment, error) {
	return call(ctx, c, cloud.OperationDetachVolume, func() (*cloud.Attachment, error) { return c.client.DetachVolume(ctx, volumeID, instanceID) })
}

// ResizeVolume is cloud.Client.ResizeVolume.
func (c *realCloud) ResizeVolume(ctx context.Context, volumeID string, sizeBytes int64) (*cloud.Volume, error) {
	return call(ctx, c, cloud.OperationResizeVolume, func() (*cloud.Volume, error) { return c.client.ResizeVolume(ctx, volumeID, sizeBytes) })
}

// ModifyVolume is cloud.Client.ModifyVolume.
func (c *realCloud) ModifyVolume(ctx context.Context, volumeID string, req cloud.ModifyVolumeRequest) (*cloud.Volume, error) {
	return call(ctx, c, cloud.OperationModifyVolume, func() (*cloud.Volume, error) { return c.client.ModifyVolume(ctx, volumeID, req) })
}

// CreateSnapshot is cloud.Client.CreateSnapshot.
func (c *realCloud) CreateSnapshot(ctx context.Context, req cloud.CreateSnapshotRequest) (*cloud.Snapshot, error) {
	return call(ctx, c, cloud.OperationCreateSnapshot, func() (*cloud.Snapshot, error) { return c.client.CreateSnapshot(ctx, req) })
}

// GetSnapshot is cloud.Client.GetSnapshot (operation cloudOpGetSnapshot).
func (c *realCloud) GetSnapshot(ctx context.Context, id string) (*cloud.Snapshot, error) {
	return call(ctx, c, cloudOpGetSnapshot, func() (*cloud.Snapshot, error) { return c.client.GetSnapshot(ctx, id) })
}

// ListSnapshots is cloud.Client.ListSnapshots.
func (c *realCloud) ListSnapshots(ctx context.Context, opts cloud.ListSnapshotsOptions) (*cloud.SnapshotList, error) {
	return call(ctx, c, cloud.OperationListSnapshots, func() (*cloud.SnapshotList, error) { return c.client.ListSnapshots(ctx, opts) })
}

// DeleteSnapshot is cloud.Client.DeleteSnapshot.
func (c *realCloud) DeleteSnapshot(ctx context.Context, id string) error {
	_, err := call(ctx, c, cloud.OperationDeleteSnapshot, func() (struct{}, error) { return struct{}{}, c.client.DeleteSnapshot(ctx, id) })
	return err
}

// CreateGroupSnapshot is cloud.Client.CreateGroupSnapshot.
func (c *realCloud) CreateGroupSnapshot(ctx context.Context, req cloud.CreateGroupSnapshotRequest) (*cloud.GroupSnapshot, error) {
	return call(ctx, c, cloud.OperationCreateGroupSnapshot, func() (*cloud.GroupSnapshot, error) { return c.client.CreateGroupSnapshot(ctx, req) })
}

// GetGroupSnapshot is cloud.Client.GetGroupSnapshot (operation cloudOpGetGroupSnapshot).
func (c *realCloud) GetGroupSnapshot(ctx context.Context, id string) (*cloud.GroupSnapshot, error) {
	return call(ctx, c, cloudOpGetGroupSnapshot, func() (*cloud.GroupSnapshot, error) { return c.client.GetGroupSnapshot(ctx, id) })
}

// DeleteGroupSnapshot is cloud.Client.DeleteGroupSnapshot.
func (c *realCloud) DeleteGroupSnapshot(ctx context.Context, id string) error {
	_, err := call(ctx, c, cloud.OperationDeleteGroupSnapshot, func() (struct{}, error) { return struct{}{}, c.client.DeleteGroupSnapshot(ctx, id) })
	return err
}

// AddVolume creates a volume through the admin client (not counted as a call), for tests
// that need one without the driver's CreateVolume; the cloud issues its ID.
func (c *realCloud) AddVolume(req cloud.CreateVolumeRequest) *cloud.Volume {
	c.t.Helper()
	v, err := c.admin.CreateVolume(context.Background(), req)
	c.must(err)
	return v
}
