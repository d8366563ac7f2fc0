package sanity_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/tests/teststack"
)

// transitionEvents counts the cloud's transition events of one volume by type.
func transitionEvents(t *testing.T, s *teststack.Stack, vol string) map[string]int {
	t.Helper()
	events, err := s.Admin.ListEvents(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range events {
		if e.VolumeID == vol && e.Type != "VolumeCreated" {
			n[e.Type]++
		}
	}
	return n
}

// TestPublishSlowerThanDeadline: an attach slower than the caller's deadline answers
// DEADLINE_EXCEEDED before that deadline; concurrent and later retries join the one attach
// in the cloud and return OK with the same publish_context. Unpublish mirrors it.
func TestPublishSlowerThanDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for seconds-long attaches")
	}
	s := teststack.Start(t, teststack.Config{AttachLimit: 8, Instances: []string{"node-1"},
		AttachDuration: 2 * time.Second, DetachDuration: 2 * time.Second})
	ctrl := csi.NewControllerClient(s.Conn)
	vol := s.CreateVolume(t, "slow")
	pub := teststack.PublishRequest(vol, s.NodeID)

	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// The driver answers a little before the deadline (TestWaitContext); on a loaded machine
	// gRPC's own deadline may still come first, with the same code.
	if _, err := ctrl.ControllerPublishVolume(short, pub); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("publish past its deadline: %v; want DEADLINE_EXCEEDED", err)
	}
	var wg sync.WaitGroup
	resps := make([]*csi.ControllerPublishVolumeResponse, 3)
	errs := make([]error, 3)
	for i := range resps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = ctrl.ControllerPublishVolume(context.Background(), pub)
		}()
	}
	wg.Wait()
	for i := range resps {
		if errs[i] != nil || !proto.Equal(resps[i], resps[0]) {
			t.Fatalf("retry %d: %v, %v; want OK with the publish_context %v", i, resps[i], errs[i], resps[0])
		}
	}
	if got := transitionEvents(t, s, vol); got["VolumeAttaching"] != 1 || got["VolumeAttached"] != 1 {
		t.Fatalf("cloud events %v: want exactly one attach", got)
	}

	unpub := &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: s.NodeID}
	short2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if _, err := ctrl.ControllerUnpublishVolume(short2, unpub); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("unpublish past its deadline: %v; want DEADLINE_EXCEEDED", err)
	}
	if _, err := ctrl.ControllerUnpublishVolume(context.Background(), unpub); err != nil {
		t.Fatalf("unpublish retry: %v", err)
	}
	if got := attachedTo(t, s, vol); got != "" {
		t.Fatalf("volume attached to %q after unpublish returned OK", got)
	}
	if got := transitionEvents(t, s, vol); got["VolumeDetaching"] != 1 || got["VolumeDetached"] != 1 {
		t.Fatalf("cloud events %v: want exactly one detach", got)
	}
}

// TestJoinedPublishOvertakenByItsTwin: of two publishes of one volume to one node that join
// each other in the driver, each sends its attach; when the later attach is carried out first
// (the earlier one still waits out a latency rule here, a busy scheduler did it in CI), both
// publishes return OK with the same publish_context, and the cloud made one attach. Before,
// the cloud dropped the earlier attach as superseded and the CO got UNAVAILABLE for an attach
// under way exactly as it asked (TestPublishSlowerThanDeadline failed so under load).
func TestJoinedPublishOvertakenByItsTwin(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 3 s injected latency")
	}
	s := teststack.Start(t, teststack.Config{AttachLimit: 8, Instances: []string{"node-1"}})
	ctx := context.Background()
	ctrl := csi.NewControllerClient(s.Conn)
	vol := s.CreateVolume(t, "twins")
	pub := teststack.PublishRequest(vol, s.NodeID)
	// Only the first attach is slowed; the twin is carried out while it waits. Should this
	// machine take longer than the latency to carry the twin out, the attaches run in arrival
	// order and the test checks less, never fails wrongly.
	if _, err := s.Admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, VolumeID: vol, LatencyMS: 3000, Count: 1}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp *csi.ControllerPublishVolumeResponse
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		resp, err := ctrl.ControllerPublishVolume(ctx, pub)
		first <- answer{resp, err}
	}()
	// The first attach is in the cloud, in its place in the volume's order, once the rule fired.
	for deadline := time.Now().Add(30 * time.Second); transitionEvents(t, s, vol)["FaultFired"] == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first publish's attach never reached the cloud")
		}
	}
	twin, err := ctrl.ControllerPublishVolume(ctx, pub)
	if err != nil {
		t.Fatalf("the twin publish: %v", err)
	}
	got := <-first
	if got.err != nil || !proto.Equal(got.resp, twin) {
		t.Fatalf("the publish whose attach its twin overtook: %v, %v; want OK with the publish_context %v", got.resp, got.err, twin)
	}
	if ev := transitionEvents(t, s, vol); ev["VolumeAttaching"] != 1 || ev["VolumeAttached"] != 1 || ev["RequestSuperseded"] != 0 {
		t.Fatalf("cloud events %v: want exactly one attach, nothing superseded", ev)
	}
}

// TestTransitionFaultsThroughTheDriver: a transition that a fault rule fails is answered
// with the failure's code (never RESOURCE_EXHAUSTED unless it is a capacity code); a detach a
// rule holds is DEADLINE_EXCEEDED at the deadline, and OK once the rule is deleted.
func TestTransitionFaultsThroughTheDriver(t *testing.T) {
	s := teststack.Start(t, teststack.Config{AttachLimit: 8, Instances: []string{"node-1"}})
	ctx := context.Background()
	ctrl := csi.NewControllerClient(s.Conn)
	vol := s.CreateVolume(t, "faulty")
	pub := teststack.PublishRequest(vol, s.NodeID)
	if _, err := s.Admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, VolumeID: vol,
		Transition: cloud.TransitionFail, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.ControllerPublishVolume(ctx, pub); status.Code(err) != codes.Internal {
		t.Fatalf("publish of an attach that fails: %v; want INTERNAL", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		// The per-volume backoff of a transient failure passes; then the attach goes through.
		_, err := ctrl.ControllerPublishVolume(ctx, pub)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish after the failed attach: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rule, err := s.Admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationDetachVolume, VolumeID: vol, Transition: cloud.TransitionStick})
	if err != nil {
		t.Fatal(err)
	}
	unpub := &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: s.NodeID}
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if _, err := ctrl.ControllerUnpublishVolume(short, unpub); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("unpublish of a stuck detach: %v; want DEADLINE_EXCEEDED", err)
	}
	if c, err := s.Admin.GetCapacity(ctx, s.NodeID); err != nil || c.Detaching != 1 || c.Attached != 1 {
		t.Fatalf("capacity %+v, %v: want the stuck detach holding its slot", c, err)
	}
	if err := s.Admin.DeleteFault(ctx, rule.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.ControllerUnpublishVolume(ctx, unpub); err != nil {
		t.Fatalf("unpublish once the rule is gone: %v", err)
	}
}
