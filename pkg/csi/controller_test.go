package csi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
)

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func blockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

var rwo = mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)

func newController(t *testing.T) (*ControllerServer, *realCloud) {
	t.Helper()
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 4, 1)
	f.AddInstance("i-2", "zone-a", 4, 0)
	f.AddInstance("i-b", "zone-b", 4, 0)
	return NewControllerServer(f, nil, nil), f
}

func mustCreate(t *testing.T, s *ControllerServer, name string) *csi.Volume {
	t.Helper()
	resp, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: name, VolumeCapabilities: []*csi.VolumeCapability{rwo},
		AccessibilityRequirements: &csi.TopologyRequirement{Preferred: topologyOf("zone-a")},
	})
	if err != nil {
		t.Fatalf("CreateVolume(%s): %v", name, err)
	}
	return resp.GetVolume()
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("code = %s (%v), want %s", got, err, want)
	}
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			t.Fatalf("error %v is not a status error", err)
		}
	}
}

func TestControllerValidationChangesNothing(t *testing.T) {
	multi := mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	noType := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	tests := map[string]func(s *ControllerServer) error{
		"create without name": func(s *ControllerServer) error {
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{rwo}})
			return err
		},
		"create without capabilities": func(s *ControllerServer) error {
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "v"})
			return err
		},
		"create multi-node": func(s *ControllerServer) error {
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{multi}})
			return err
		},
		"create capability without access type": func(s *ControllerServer) error {
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{noType}})
			return err
		},
		"create negative range": func(s *ControllerServer) error {
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo},
				CapacityRange: &csi.CapacityRange{RequiredBytes: -1}})
			return err
		},
		"create clone without a source ID": func(s *ControllerServer) error {
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo},
				VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{}}}})
			return err
		},
		"delete without id": func(s *ControllerServer) error {
			_, err := s.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{})
			return err
		},
		"publish without volume id": func(s *ControllerServer) error {
			_, err := s.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{NodeId: "i-1", VolumeCapability: rwo})
			return err
		},
		"publish without node id": func(s *ControllerServer) error {
			_, err := s.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{VolumeId: "vol-0001", VolumeCapability: rwo})
			return err
		},
		"publish without capability": func(s *ControllerServer) error {
			_, err := s.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{VolumeId: "vol-0001", NodeId: "i-1"})
			return err
		},
		"publish multi-node": func(s *ControllerServer) error {
			_, err := s.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{VolumeId: "vol-0001", NodeId: "i-1", VolumeCapability: multi})
			return err
		},
		"unpublish without volume id": func(s *ControllerServer) error {
			_, err := s.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{NodeId: "i-1"})
			return err
		},
		"validate without capabilities": func(s *ControllerServer) error {
			_, err := s.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-0001"})
			return err
		},
		"list negative max": func(s *ControllerServer) error {
			_, err := s.ListVolumes(context.Background(), &csi.ListVolumesRequest{MaxEntries: -1})
			return err
		},
		"snapshot without name": func(s *ControllerServer) error {
			_, err := s.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{SourceVolumeId: "vol-0001"})
			return err
		},
		"snapshot without source": func(s *ControllerServer) error {
			_, err := s.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "s"})
			return err
		},
		"delete snapshot without id": func(s *ControllerServer) error {
			_, err := s.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{})
			return err
		},
		"expand without range": func(s *ControllerServer) error {
			_, err := s.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{VolumeId: "vol-0001"})
			return err
		},
		"expand without id": func(s *ControllerServer) error {
			_, err := s.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: GiB}})
			return err
		},
		"get volume without id": func(s *ControllerServer) error {
			_, err := s.ControllerGetVolume(context.Background(), &csi.ControllerGetVolumeRequest{})
			return err
		},
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			s, f := newController(t)
			mustCreate(t, s, "existing")
			before := f.Revision()
			wantCode(t, call(s), codes.InvalidArgument)
			if after := f.Revision(); after != before {
				t.Errorf("cloud revision moved from %d to %d", before, after)
			}
		})
	}
}

func TestControllerPublishErrors(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(f *realCloud, volID string)
		volume string // "" means the created volume
		node   string
		want   codes.Code
	}{
		{name: "ok", node: "i-1", want: codes.OK},
		{name: "node slots full", node: "i-1", setup: func(f *realCloud, _ string) { f.SetInstanceLimits("i-1", 2, 2) }, want: codes.ResourceExhausted},
		{name: "attachment quota", node: "i-1", setup: func(f *realCloud, _ string) { f.SetQuotaLimits(0, 100, 1<<50) }, want: codes.ResourceExhausted},
		{name: "zone mismatch", node: "i-b", want: codes.FailedPrecondition},
		{name: "attached elsewhere", node: "i-1", setup: func(f *realCloud, id string) {
			if _, err := f.AttachVolume(context.Background(), id, "i-2"); err != nil {
				panic(err)
			}
		}, want: codes.FailedPrecondition},
		{name: "volume missing", volume: "vol-9999", node: "i-1", want: codes.NotFound},
		{name: "node missing", node: "i-404", want: codes.NotFound},
	}
	injected := map[cloud.Code]codes.Code{
		cloud.CodeAccessDenied: codes.PermissionDenied, cloud.CodeUnauthenticated: codes.Unauthenticated,
		cloud.CodeThrottled: codes.Unavailable, cloud.CodeUnavailable: codes.Unavailable,
		cloud.CodeInternalError: codes.Internal, cloud.CodeZoneMismatch: codes.FailedPrecondition,
		cloud.CodeAttachmentLimitExceeded: codes.ResourceExhausted, cloud.CodeAttachmentQuotaExceeded: codes.ResourceExhausted,
	}
	for c, want := range injected {
		tests = append(tests, struct {
			name   string
			setup  func(f *realCloud, volID string)
			volume string
			node   string
			want   codes.Code
		}{name: "injected " + string(c), node: "i-1", want: want, setup: func(f *realCloud, _ string) {
			f.FailNext(cloud.OperationAttachVolume, cloud.NewError(c, "injected"))
		}})
	}
	tests = append(tests, struct {
		name   string
		setup  func(f *realCloud, volID string)
		volume string
		node   string
		want   codes.Code
	}{name: "timeout", node: "i-1", want: codes.DeadlineExceeded, setup: func(f *realCloud, _ string) {
		f.FailNext(cloud.OperationAttachVolume, context.DeadlineExceeded)
	}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, f := newController(t)
			v := mustCreate(t, s, "v")
			if tc.setup != nil {
				tc.setup(f, v.GetVolumeId())
			}
			id := tc.volume
			if id == "" {
				id = v.GetVolumeId()
			}
			resp, err := s.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: tc.node, VolumeCapability: rwo})
			wantCode(t, err, tc.want)
			if tc.want == codes.OK && resp.GetPublishContext()[PublishContextDevicePath] == "" {
				t.Errorf("publish_context = %v, want a devicePath", resp.GetPublishContext())
			}
		})
	}
}

func TestControllerIdempotency(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	v1 := mustCreate(t, s, "pvc-1")
	v2 := mustCreate(t, s, "pvc-1")
	if v1.GetVolumeId() != v2.GetVolumeId() {
		t.Fatalf("same name gave volumes %s and %s", v1.GetVolumeId(), v2.GetVolumeId())
	}
	_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 5 * GiB}})
	wantCode(t, err, codes.AlreadyExists)

	pub := &csi.ControllerPublishVolumeRequest{VolumeId: v1.GetVolumeId(), NodeId: "i-1", VolumeCapability: rwo}
	p1, err := s.ControllerPublishVolume(ctx, pub)
	wantCode(t, err, codes.OK)
	p2, err := s.ControllerPublishVolume(ctx, pub)
	wantCode(t, err, codes.OK)
	if p1.GetPublishContext()[PublishContextDevicePath] != p2.GetPublishContext()[PublishContextDevicePath] {
		t.Errorf("second publish moved the device: %v vs %v", p1.GetPublishContext(), p2.GetPublishContext())
	}
	if n := len(f.Volumes()); n != 1 {
		t.Fatalf("cloud has %d volumes, want 1", n)
	}

	_, err = s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v1.GetVolumeId()})
	wantCode(t, err, codes.FailedPrecondition)

	unpub := &csi.ControllerUnpublishVolumeRequest{VolumeId: v1.GetVolumeId(), NodeId: "i-1"}
	for i := 0; i < 2; i++ {
		_, err = s.ControllerUnpublishVolume(ctx, unpub)
		wantCode(t, err, codes.OK)
	}
	if got := f.Volumes()[0].AttachedTo; got != "" {
		t.Fatalf("volume still attached to %q", got)
	}
	for _, req := range []*csi.ControllerUnpublishVolumeRequest{
		{VolumeId: "vol-9999", NodeId: "i-1"},
		{VolumeId: v1.GetVolumeId(), NodeId: "i-404"},
		{VolumeId: "vol-9999"},
	} {
		_, err = s.ControllerUnpublishVolume(ctx, req)
		wantCode(t, err, codes.OK)
	}
	for i := 0; i < 2; i++ {
		_, err = s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v1.GetVolumeId()})
		wantCode(t, err, codes.OK)
	}
	if n := len(f.Volumes()); n != 0 {
		t.Fatalf("cloud has %d volumes after delete, want 0", n)
	}
}

func TestControllerUnpublishWithoutNodeID(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	v := mustCreate(t, s, "v")
	if _, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-2", VolumeCapability: rwo}); err != nil {
		t.Fatal(err)
	}
	_, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v.GetVolumeId()})
	wantCode(t, err, codes.OK)
	if got := f.Volumes()[0].AttachedTo; got != "" {
		t.Fatalf("volume still attached to %q", got)
	}
}

func TestControllerUnpublishErrors(t *testing.T) {
	for c, want := range map[cloud.Code]codes.Code{
		cloud.CodeThrottled: codes.Unavailable, cloud.CodeAccessDenied: codes.PermissionDenied,
		cloud.CodeVolumeNotFound: codes.OK, cloud.CodeInstanceNotFound: codes.OK,
	} {
		t.Run(string(c), func(t *testing.T) {
			s, f := newController(t)
			v := mustCreate(t, s, "v")
			f.FailNext(cloud.OperationDetachVolume, cloud.NewError(c, "injected"))
			_, err := s.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1"})
			wantCode(t, err, want)
		})
	}
}

// TestControllerInFlightIsAborted: while a publish is in flight, other operations on the
// volume are ABORTED without reaching the cloud; the same publish joins it instead.
func TestControllerInFlightIsAborted(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	v := mustCreate(t, s, "v")
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.SetHook(cloud.OperationAttachVolume, func(ctx context.Context) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	})
	pub := &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1", VolumeCapability: rwo}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, errs[0] = s.ControllerPublishVolume(ctx, pub)
	}()
	<-entered
	_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-2", VolumeCapability: rwo})
	wantCode(t, err, codes.Aborted)
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1"})
	wantCode(t, err, codes.Aborted)
	_, err = s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.GetVolumeId()})
	wantCode(t, err, codes.Aborted)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, errs[1] = s.ControllerPublishVolume(ctx, pub) // joins
	}()
	close(release)
	wg.Wait()
	wantCode(t, errs[0], codes.OK)
	wantCode(t, errs[1], codes.OK)
	f.SetHook(cloud.OperationAttachVolume, nil)
	// The guard is released: the same call now goes through (and is idempotent).
	_, err = s.ControllerPublishVolume(ctx, pub)
	wantCode(t, err, codes.OK)
	if got := f.Calls(cloud.OperationAttachVolume); got != 3 {
		t.Errorf("AttachVolume called %d times, want 3 (aborted calls must not reach the cloud)", got)
	}
	if got := f.TransitionsStarted(); got != 1 {
		t.Errorf("%d attaches started in the cloud, want 1", got)
	}
}

// waitState waits until the fake cloud shows volume id in state want.
func waitState(t *testing.T, f *realCloud, id string, want cloud.AttachState) {
	t.Helper()
	for range 10000 {
		v, err := f.GetVolume(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if v.State == want {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("volume %s never became %s", id, want)
}

// TestPublishJoinsAsyncAttach: with an asynchronous cloud, publish waits for attached; a
// retry while it waits joins it; both get the same publish_context and the cloud starts one
// attach.
func TestPublishJoinsAsyncAttach(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	f.SetAsync(true)
	v := mustCreate(t, s, "v")
	pub := &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1", VolumeCapability: rwo}
	var wg sync.WaitGroup
	resps := make([]*csi.ControllerPublishVolumeResponse, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = s.ControllerPublishVolume(ctx, pub)
		}()
		waitState(t, f, v.GetVolumeId(), cloud.StateAttaching)
	}
	if n := f.Complete(); n != 1 {
		t.Fatalf("%d transitions under way, want 1", n)
	}
	wg.Wait()
	for i := range 2 {
		wantCode(t, errs[i], codes.OK)
	}
	if !proto.Equal(resps[0], resps[1]) || resps[0].GetPublishContext()[PublishContextDevicePath] == "" {
		t.Fatalf("publish contexts %v and %v, want the same device", resps[0], resps[1])
	}
	if got := f.TransitionsStarted(); got != 1 {
		t.Errorf("%d attaches started in the cloud, want 1", got)
	}
}

// TestPublishDeadlineThenRetry: a publish whose deadline comes while the cloud still attaches
// answers DEADLINE_EXCEEDED (not final for the external-attacher); the attach goes on, and the
// next publish returns OK with the same publish_context. Unpublish mirrors it.
func TestPublishDeadlineThenRetry(t *testing.T) {
	s, f := newController(t)
	f.SetAsync(true)
	v := mustCreate(t, s, "v")
	pub := &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1", VolumeCapability: rwo}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := s.ControllerPublishVolume(short, pub)
	wantCode(t, err, codes.DeadlineExceeded)
	f.Complete()
	resp, err := s.ControllerPublishVolume(context.Background(), pub)
	wantCode(t, err, codes.OK)
	again, err := s.ControllerPublishVolume(context.Background(), pub)
	wantCode(t, err, codes.OK)
	if !proto.Equal(resp, again) {
		t.Errorf("publish contexts %v and %v differ", resp, again)
	}

	unpub := &csi.ControllerUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1"}
	short2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	_, err = s.ControllerUnpublishVolume(short2, unpub)
	wantCode(t, err, codes.DeadlineExceeded)
	// While detaching, a publish to the same node is "operation pending": ABORTED.
	_, err = s.ControllerPublishVolume(context.Background(), pub)
	wantCode(t, err, codes.Aborted)
	f.Complete()
	_, err = s.ControllerUnpublishVolume(context.Background(), unpub)
	wantCode(t, err, codes.OK)
	if got := f.TransitionsStarted(); got != 2 {
		t.Errorf("%d transitions started in the cloud, want 2 (one attach, one detach)", got)
	}
}

// TestWaitContext: a wait for a transition ends before the caller's deadline, by a tenth of
// the time left (at most answerMargin), so the answer reaches the caller in time.
func TestWaitContext(t *testing.T) {
	for _, tc := range []struct {
		left, margin time.Duration
	}{
		{time.Second, 100 * time.Millisecond},
		{time.Minute, answerMargin},
		{10 * time.Second, answerMargin},
	} {
		deadline := time.Now().Add(tc.left)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		wctx, wcancel := waitContext(ctx)
		got, ok := wctx.Deadline()
		wcancel()
		cancel()
		// time.Until in waitContext runs a moment after time.Now here: allow 1% of slack.
		if want := deadline.Add(-tc.margin); !ok || got.After(want.Add(tc.left/100)) || got.Before(want) {
			t.Errorf("%v left: wait deadline %v, want %v before the caller's", tc.left, deadline.Sub(got), tc.margin)
		}
	}
	wctx, cancel := waitContext(context.Background())
	defer cancel()
	if d, ok := wctx.Deadline(); !ok || time.Until(d) > maxTransitionWait {
		t.Errorf("no caller deadline: wait deadline %v, %v; want at most %v", d, ok, maxTransitionWait)
	}
}

// TestTransitionFailureCodes: an attach or detach the cloud ends in error is answered with
// the code of its failure, as if the call had failed with it.
func TestTransitionFailureCodes(t *testing.T) {
	for _, tc := range []struct {
		fail            cloud.Code
		publish, detach codes.Code
	}{
		{cloud.CodeInternalError, codes.Internal, codes.Internal},
		{cloud.CodeAttachmentLimitExceeded, codes.ResourceExhausted, codes.ResourceExhausted},
		{cloud.CodeUnavailable, codes.Unavailable, codes.Unavailable},
	} {
		t.Run(string(tc.fail), func(t *testing.T) {
			ctx := context.Background()
			s, f := newController(t)
			f.FailTransitions(tc.fail)
			v := mustCreate(t, s, "v")
			pub := &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1", VolumeCapability: rwo}
			done := make(chan error, 1)
			go func() {
				_, err := s.ControllerPublishVolume(ctx, pub)
				done <- err
			}()
			waitState(t, f, v.GetVolumeId(), cloud.StateAttaching)
			f.Complete()
			wantCode(t, <-done, tc.publish)

			f.SetAsync(false)
			_, err := s.ControllerPublishVolume(ctx, pub)
			wantCode(t, err, codes.OK)
			f.FailTransitions(tc.fail)
			go func() {
				_, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1"})
				done <- err
			}()
			waitState(t, f, v.GetVolumeId(), cloud.StateDetaching)
			f.Complete()
			wantCode(t, <-done, tc.detach)
		})
	}
}

func TestVolumeSize(t *testing.T) {
	tests := []struct {
		name     string
		req, lim int64
		atLeast  int64
		want     int64
		code     codes.Code
	}{
		{name: "default", want: DefaultVolumeSize},
		{name: "exact GiB", req: 3 * GiB, want: 3 * GiB},
		{name: "rounds up", req: GiB + 1, want: 2 * GiB},
		{name: "small rounds to 1GiB", req: 1, want: GiB},
		{name: "limit equal", req: 2 * GiB, lim: 2 * GiB, want: 2 * GiB},
		{name: "rounding passes limit", req: GiB + 1, lim: GiB + 10, code: codes.OutOfRange},
		{name: "required above limit", req: 3 * GiB, lim: 2 * GiB, code: codes.OutOfRange},
		{name: "only limit above default", lim: 5 * GiB, want: DefaultVolumeSize},
		{name: "only limit below 1GiB", lim: GiB / 2, code: codes.OutOfRange},
		{name: "too large", req: MaxVolumeSize + 1, code: codes.OutOfRange},
		{name: "snapshot size default", atLeast: 3*GiB - 5, want: 3 * GiB},
		{name: "smaller than snapshot", req: GiB, atLeast: 2 * GiB, code: codes.OutOfRange},
		{name: "limit below snapshot", lim: 2 * GiB, atLeast: 3 * GiB, code: codes.OutOfRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := volumeSize(&csi.CapacityRange{RequiredBytes: tc.req, LimitBytes: tc.lim}, tc.atLeast)
			wantCode(t, err, tc.code)
			if got != tc.want {
				t.Errorf("size = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCreateVolumeFromRequest(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	src := mustCreate(t, s, "src")
	snap, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: src.GetVolumeId()})
	wantCode(t, err, codes.OK)
	tests := []struct {
		name     string
		req      *csi.CreateVolumeRequest
		code     codes.Code
		wantZone string
		wantSize int64
	}{
		{name: "preferred zone first", req: &csi.CreateVolumeRequest{AccessibilityRequirements: &csi.TopologyRequirement{
			Requisite: append(topologyOf("zone-a"), topologyOf("zone-b")...), Preferred: topologyOf("zone-b")}}, wantZone: "zone-b", wantSize: GiB},
		{name: "requisite when no preferred", req: &csi.CreateVolumeRequest{AccessibilityRequirements: &csi.TopologyRequirement{
			Requisite: topologyOf("zone-b")}}, wantZone: "zone-b", wantSize: GiB},
		{name: "block capacity range", req: &csi.CreateVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: 3*GiB - 1},
			VolumeCapabilities: []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}}, wantZone: "zone-a", wantSize: 3 * GiB},
		{name: "out of range", req: &csi.CreateVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * GiB, LimitBytes: 2 * GiB}}, code: codes.OutOfRange},
		{name: "from snapshot", req: &csi.CreateVolumeRequest{VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}}}, wantZone: "zone-a", wantSize: GiB},
		{name: "missing snapshot", req: &csi.CreateVolumeRequest{VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-9999"}}}}, code: codes.NotFound},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Name = "pvc-" + string(rune('a'+i))
			if tc.req.VolumeCapabilities == nil {
				tc.req.VolumeCapabilities = []*csi.VolumeCapability{rwo}
			}
			before := len(f.Volumes())
			resp, err := s.CreateVolume(ctx, tc.req)
			wantCode(t, err, tc.code)
			if err != nil {
				if len(f.Volumes()) != before {
					t.Errorf("a failed create changed the volume count")
				}
				return
			}
			v := resp.GetVolume()
			if got := v.GetAccessibleTopology()[0].GetSegments()[TopologyZoneKey]; got != tc.wantZone {
				t.Errorf("zone = %q, want %q", got, tc.wantZone)
			}
			if v.GetCapacityBytes() != tc.wantSize {
				t.Errorf("size = %d, want %d", v.GetCapacityBytes(), tc.wantSize)
			}
		})
	}
}

func TestCreateVolumeQuota(t *testing.T) {
	for name, limits := range map[string][3]int64{"volumes": {100, 0, 1 << 50}, "bytes": {100, 100, GiB - 1}} {
		t.Run(name, func(t *testing.T) {
			s, f := newController(t)
			f.SetQuotaLimits(limits[0], limits[1], limits[2])
			_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{rwo}})
			wantCode(t, err, codes.ResourceExhausted)
		})
	}
}

func TestListVolumesPaging(t *testing.T) {
	ctx := context.Background()
	s, _ := newController(t)
	want := map[string]bool{}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		want[mustCreate(t, s, n).GetVolumeId()] = true
	}
	var first string
	for id := range want {
		first = id
		break
	}
	if _, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: first, NodeId: "i-2", VolumeCapability: rwo}); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	token, pages := "", 0
	for {
		resp, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token})
		wantCode(t, err, codes.OK)
		pages++
		if len(resp.GetEntries()) > 2 {
			t.Fatalf("page has %d entries, max 2", len(resp.GetEntries()))
		}
		for _, e := range resp.GetEntries() {
			id := e.GetVolume().GetVolumeId()
			if got[id] {
				t.Errorf("volume %s listed twice", id)
			}
			got[id] = true
			nodes := e.GetStatus().GetPublishedNodeIds()
			if id == first && (len(nodes) != 1 || nodes[0] != "i-2") {
				t.Errorf("published nodes of %s = %v, want [i-2]", id, nodes)
			}
			if id != first && len(nodes) != 0 {
				t.Errorf("published nodes of %s = %v, want none", id, nodes)
			}
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	if pages != 3 || len(got) != len(want) {
		t.Errorf("listed %d volumes in %d pages, want %d in 3", len(got), pages, len(want))
	}
	_, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "not-a-token"})
	wantCode(t, err, codes.Aborted)
}

func TestSnapshots(t *testing.T) {
	ctx := context.Background()
	s, _ := newController(t)
	a, b := mustCreate(t, s, "a"), mustCreate(t, s, "b")
	var ids []string
	for _, tc := range []struct{ name, src string }{{"s1", a.GetVolumeId()}, {"s2", a.GetVolumeId()}, {"s3", b.GetVolumeId()}} {
		r1, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: tc.name, SourceVolumeId: tc.src})
		wantCode(t, err, codes.OK)
		r2, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: tc.name, SourceVolumeId: tc.src})
		wantCode(t, err, codes.OK)
		if r1.GetSnapshot().GetSnapshotId() != r2.GetSnapshot().GetSnapshotId() || !r1.GetSnapshot().GetReadyToUse() {
			t.Fatalf("snapshot %s not idempotent or not ready: %v %v", tc.name, r1, r2)
		}
		ids = append(ids, r1.GetSnapshot().GetSnapshotId())
	}
	_, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: b.GetVolumeId()})
	wantCode(t, err, codes.AlreadyExists)
	_, err = s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s9", SourceVolumeId: "vol-9999"})
	wantCode(t, err, codes.NotFound)

	count := func(req *csi.ListSnapshotsRequest) int {
		t.Helper()
		n := 0
		for {
			resp, err := s.ListSnapshots(ctx, req)
			wantCode(t, err, codes.OK)
			n += len(resp.GetEntries())
			if resp.GetNextToken() == "" {
				return n
			}
			req.StartingToken = resp.GetNextToken()
		}
	}
	for name, tc := range map[string]struct {
		req  *csi.ListSnapshotsRequest
		want int
	}{
		"all":                 {&csi.ListSnapshotsRequest{}, 3},
		"all paged":           {&csi.ListSnapshotsRequest{MaxEntries: 1}, 3},
		"by id":               {&csi.ListSnapshotsRequest{SnapshotId: ids[2]}, 1},
		"by missing id":       {&csi.ListSnapshotsRequest{SnapshotId: "snap-9999"}, 0},
		"by source":           {&csi.ListSnapshotsRequest{SourceVolumeId: a.GetVolumeId(), MaxEntries: 1}, 2},
		"id and other source": {&csi.ListSnapshotsRequest{SnapshotId: ids[2], SourceVolumeId: a.GetVolumeId()}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			if got := count(tc.req); got != tc.want {
				t.Errorf("listed %d snapshots, want %d", got, tc.want)
			}
		})
	}
	_, err = s.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "bogus"})
	wantCode(t, err, codes.Aborted)
	for i := 0; i < 2; i++ {
		_, err = s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: ids[0]})
		wantCode(t, err, codes.OK)
	}
}

func TestControllerExpandVolume(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	v := mustCreate(t, s, "v")
	resp, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 2*GiB + 1}})
	wantCode(t, err, codes.OK)
	if resp.GetCapacityBytes() != 3*GiB || !resp.GetNodeExpansionRequired() {
		t.Errorf("expand = %v, want 3GiB and node expansion", resp)
	}
	if got := f.Volumes()[0].SizeBytes; got != 3*GiB {
		t.Errorf("cloud size = %d, want 3GiB", got)
	}
	resp, err = s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: GiB}})
	wantCode(t, err, codes.OK)
	if resp.GetCapacityBytes() != 3*GiB {
		t.Errorf("shrink request answered %d, want the current 3GiB", resp.GetCapacityBytes())
	}
	_, err = s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "vol-9999", CapacityRange: &csi.CapacityRange{RequiredBytes: GiB}})
	wantCode(t, err, codes.NotFound)
	_, err = s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 5 * GiB, LimitBytes: 4 * GiB}})
	wantCode(t, err, codes.OutOfRange)
}

func TestControllerGetVolumeAndValidate(t *testing.T) {
	ctx := context.Background()
	s, _ := newController(t)
	v := mustCreate(t, s, "v")
	if _, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "i-1", VolumeCapability: rwo}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: v.GetVolumeId()})
	wantCode(t, err, codes.OK)
	if n := got.GetStatus().GetPublishedNodeIds(); len(n) != 1 || n[0] != "i-1" {
		t.Errorf("published nodes = %v, want [i-1]", n)
	}
	_, err = s.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "vol-9999"})
	wantCode(t, err, codes.NotFound)

	for name, tc := range map[string]struct {
		id        string
		cap       *csi.VolumeCapability
		code      codes.Code
		confirmed bool
	}{
		"single node":    {v.GetVolumeId(), rwo, codes.OK, true},
		"block":          {v.GetVolumeId(), blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY), codes.OK, true},
		"multi node":     {v.GetVolumeId(), mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY), codes.OK, false},
		"missing volume": {"vol-9999", rwo, codes.NotFound, false},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := s.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: tc.id, VolumeCapabilities: []*csi.VolumeCapability{tc.cap}})
			wantCode(t, err, tc.code)
			if (resp.GetConfirmed() != nil) != tc.confirmed {
				t.Errorf("confirmed = %v, want %v", resp.GetConfirmed(), tc.confirmed)
			}
		})
	}
}

func TestGetCapacity(t *testing.T) {
	s, f := newController(t)
	f.SetQuotaLimits(100, 100, 10*GiB)
	mustCreate(t, s, "v")
	resp, err := s.GetCapacity(context.Background(), &csi.GetCapacityRequest{})
	wantCode(t, err, codes.OK)
	if resp.GetAvailableCapacity() != 9*GiB {
		t.Errorf("available = %d, want 9GiB", resp.GetAvailableCapacity())
	}
	f.FailNext(cloudOpGetQuotas, cloud.NewError(cloud.CodeThrottled, "slow down"))
	_, err = s.GetCapacity(context.Background(), &csi.GetCapacityRequest{})
	wantCode(t, err, codes.Unavailable)
}

// newBackoffController is newController with a publish backoff on a fake clock, without
// jitter so that windows are exact; i-1 has 3 free slots.
func newBackoffController(t *testing.T, f *realCloud) (*ControllerServer, *clocktesting.FakePassiveClock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	cfg := backoff.DefaultConfig()
	cfg.Jitter = 0
	bo, err := backoff.New(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	return NewControllerServer(f, bo, nil), clk
}

func publish(s *ControllerServer, volID, nodeID string) (*csi.ControllerPublishVolumeResponse, error) {
	return s.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{VolumeId: volID, NodeId: nodeID, VolumeCapability: rwo})
}

// fillNode creates n volumes and publishes them to node; it returns their IDs.
func fillNode(t *testing.T, s *ControllerServer, node string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := mustCreate(t, s, fmt.Sprintf("%s-pvc-%d", node, i)).GetVolumeId()
		if _, err := publish(s, id, node); err != nil {
			t.Fatalf("publish %s to %s: %v", id, node, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestControllerPublishBackoff(t *testing.T) {
	ctx := context.Background()
	attaches := func(f *realCloud) int { return f.Calls(cloud.OperationAttachVolume) }

	t.Run("a full node is refused without the cloud until the window ends", func(t *testing.T) {
		_, f := newController(t)
		s, clk := newBackoffController(t, f)
		fillNode(t, s, "i-1", 3)
		extra := []string{mustCreate(t, s, "x-1").GetVolumeId(), mustCreate(t, s, "x-2").GetVolumeId()}
		_, err := publish(s, extra[0], "i-1")
		wantCode(t, err, codes.ResourceExhausted)
		before := attaches(f)
		_, err = publish(s, extra[1], "i-1")
		wantCode(t, err, codes.ResourceExhausted)
		if got := attaches(f); got != before {
			t.Errorf("publish within the window called AttachVolume (%d calls, want %d)", got, before)
		}
		// The refusal reaches extra[1]'s VolumeAttachment: it must be about extra[1], and
		// may quote extra[0]'s refused attach only as the cause.
		msg := status.Convert(err).Message()
		if want := fmt.Sprintf("attach %s to i-1 not tried:", extra[1]); !strings.HasPrefix(msg, want) ||
			!strings.Contains(msg, fmt.Sprintf("(attach %s to i-1:", extra[0])) {
			t.Errorf("refusal of %s = %q, want it to start %q and quote the attach of %s", extra[1], msg, want, extra[0])
		}
		// Another node is not affected.
		_, err = publish(s, extra[1], "i-2")
		wantCode(t, err, codes.OK)
		clk.SetTime(clk.Now().Add(backoff.DefaultConfig().CapacityInitial))
		_, err = publish(s, extra[0], "i-1")
		wantCode(t, err, codes.ResourceExhausted)
		if got := attaches(f); got != before+2 {
			t.Errorf("after the window: %d AttachVolume calls, want %d", got, before+2)
		}
	})

	t.Run("a detach on the node lets the next publish reach the cloud", func(t *testing.T) {
		_, f := newController(t)
		s, _ := newBackoffController(t, f)
		ids := fillNode(t, s, "i-1", 3)
		x := mustCreate(t, s, "x").GetVolumeId()
		_, err := publish(s, x, "i-1")
		wantCode(t, err, codes.ResourceExhausted)
		_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: ids[0], NodeId: "i-1"})
		wantCode(t, err, codes.OK)
		before := attaches(f)
		_, err = publish(s, x, "i-1")
		wantCode(t, err, codes.OK)
		if got := attaches(f); got != before+1 {
			t.Errorf("publish after the detach: %d AttachVolume calls, want %d", got, before+1)
		}
	})

	t.Run("a non-capacity error never turns into RESOURCE_EXHAUSTED", func(t *testing.T) {
		_, f := newController(t)
		s, clk := newBackoffController(t, f)
		v := mustCreate(t, s, "v").GetVolumeId()
		w := mustCreate(t, s, "w").GetVolumeId()
		f.FailNext(cloud.OperationAttachVolume, cloud.NewError(cloud.CodeThrottled, "slow down"))
		_, err := publish(s, v, "i-1")
		wantCode(t, err, codes.Unavailable)
		before := attaches(f)
		_, err = publish(s, v, "i-1") // within the volume's window: remembered, not asked
		wantCode(t, err, codes.Unavailable)
		if got := attaches(f); got != before {
			t.Errorf("retry within the window called AttachVolume")
		}
		_, err = publish(s, w, "i-1") // the node is not held
		wantCode(t, err, codes.OK)
		for _, c := range []cloud.Code{cloud.CodeAccessDenied, cloud.CodeZoneMismatch, cloud.CodeUnavailable} {
			clk.SetTime(clk.Now().Add(time.Minute))
			f.FailNext(cloud.OperationAttachVolume, cloud.NewError(c, "injected"))
			_, err = publish(s, v, "i-1")
			if status.Code(err) == codes.ResourceExhausted {
				t.Errorf("%s: publish = %v", c, err)
			}
			_, err = publish(s, v, "i-1")
			if status.Code(err) == codes.ResourceExhausted {
				t.Errorf("%s: second publish = %v", c, err)
			}
		}
	})

	t.Run("an attached volume re-published during the window gets OK", func(t *testing.T) {
		_, f := newController(t)
		s, _ := newBackoffController(t, f)
		ids := fillNode(t, s, "i-1", 3)
		want := f.Volumes()
		x := mustCreate(t, s, "x").GetVolumeId()
		_, err := publish(s, x, "i-1")
		wantCode(t, err, codes.ResourceExhausted)
		for _, id := range ids {
			resp, err := publish(s, id, "i-1")
			wantCode(t, err, codes.OK)
			if resp.GetPublishContext()[PublishContextDevicePath] == "" {
				t.Errorf("re-publish of %s: no devicePath", id)
			}
		}
		// A restarted controller knows nothing of what is attached; the cloud does.
		s2, _ := newBackoffController(t, f)
		_, err = publish(s2, x, "i-1")
		wantCode(t, err, codes.ResourceExhausted)
		gets := f.Calls(cloud.OperationGetVolume)
		for _, id := range ids {
			_, err := publish(s2, id, "i-1")
			wantCode(t, err, codes.OK)
		}
		if got := f.Calls(cloud.OperationGetVolume); got != gets+len(ids) {
			t.Errorf("GetVolume calls = %d, want %d (one per refused attached volume)", got, gets+len(ids))
		}
		// Re-publishing attached volumes frees no slot: the node's window still holds.
		before := attaches(f)
		_, err = publish(s2, x, "i-1")
		wantCode(t, err, codes.ResourceExhausted)
		if got := attaches(f); got != before {
			t.Errorf("publish to the still full node called AttachVolume")
		}
		for i, v := range f.Volumes() {
			if i < len(want) && (v.AttachedTo != want[i].AttachedTo || v.Device != want[i].Device) {
				t.Errorf("volume %s moved: %+v, was %+v", v.ID, v, want[i])
			}
		}
	})

	t.Run("an unconfirmed refusal reports the lookup's error", func(t *testing.T) {
		_, f := newController(t)
		s, _ := newBackoffController(t, f)
		fillNode(t, s, "i-1", 3)
		x := mustCreate(t, s, "x").GetVolumeId()
		_, err := publish(s, x, "i-1")
		wantCode(t, err, codes.ResourceExhausted)
		f.FailNext(cloud.OperationGetVolume, cloud.NewError(cloud.CodeUnavailable, "down"))
		_, err = publish(s, x, "i-1")
		wantCode(t, err, codes.Unavailable)
	})
}
