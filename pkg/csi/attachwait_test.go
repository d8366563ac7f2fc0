package csi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// awaitState waits until the fake shows volume id in state want, reading it without a call
// the fake counts (Volumes, not GetVolume).
func awaitState(t *testing.T, f *realCloud, id string, want cloud.AttachState) {
	t.Helper()
	for range 10000 {
		for _, v := range f.Volumes() {
			if v.ID == id && v.State == want {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("volume %s never became %s", id, want)
}

// transition runs publish (or unpublish) of volID to i-1 against the asynchronous fake,
// completes the transition it starts once the fake shows it under way, and returns the
// call's error.
func transition(t *testing.T, s *ControllerServer, f *realCloud, volID string, unpublish bool, fail cloud.Code) error {
	t.Helper()
	if fail != "" {
		f.FailTransitions(fail)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		if unpublish {
			_, err = s.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: volID, NodeId: "i-1"})
		} else {
			_, err = s.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{VolumeId: volID, NodeId: "i-1", VolumeCapability: rwo})
		}
		done <- err
	}()
	from := cloud.StateAttaching
	if unpublish {
		from = cloud.StateDetaching
	}
	awaitState(t, f, volID, from)
	f.Complete()
	return <-done
}

// TestPublishWaitsThroughTheCloud: publish and unpublish wait for the cloud's transition
// through its wait (WaitVolume), which the cloud answers when the transition ends, not by
// looking at the volume again and again (issue 28: the poll schedule added ~60 ms to every
// publish).
func TestPublishWaitsThroughTheCloud(t *testing.T) {
	s, f := newController(t)
	f.SetAsync(true)
	v := mustCreate(t, s, "v").GetVolumeId()
	wantCode(t, transition(t, s, f, v, false, ""), codes.OK)
	wantCode(t, transition(t, s, f, v, true, ""), codes.OK)
	if got := f.Calls(cloud.OperationGetVolume); got != 0 {
		t.Errorf("publish and unpublish looked at the volume %d times; want none: the cloud's wait answers the end", got)
	}
	if got := f.Calls(cloudOpWaitVolume); got < 2 {
		t.Errorf("%d waits, want one at least per call", got)
	}
}

// TestPublishPollsACloudWithoutWaits: a cloud that answers a wait without waiting (an older
// fake cloud) is polled, as before waits, by publish and unpublish alike, and the driver
// remembers it: it does not ask for a wait again.
func TestPublishPollsACloudWithoutWaits(t *testing.T) {
	s, f := newController(t)
	f.SetAsync(true)
	v := mustCreate(t, s, "v").GetVolumeId()
	f.FailNext(cloudOpWaitVolume, cloud.ErrWaitUnsupported)
	wantCode(t, transition(t, s, f, v, false, ""), codes.OK)
	wantCode(t, transition(t, s, f, v, true, ""), codes.OK)
	if got := f.Calls(cloudOpWaitVolume); got != 1 {
		t.Errorf("%d waits asked of a cloud that said it has none, want 1 (the first)", got)
	}
	if got := f.Calls(cloud.OperationGetVolume); got < 2 {
		t.Errorf("%d looks at the volume, want one at least per call", got)
	}
	if !s.noWait.Load() {
		t.Error("the driver forgot that the cloud has no waits")
	}
}

// TestPublishPollsWhenTheCloudHoldsAllWaits: a wait the cloud refuses because it holds all
// the waits it may (Throttled, X-Wait: busy) is no failure of the call: the driver looks at
// the volume instead and waits again, and the answer is OK, never the Throttled's
// UNAVAILABLE.
func TestPublishPollsWhenTheCloudHoldsAllWaits(t *testing.T) {
	s, f := newController(t)
	f.SetAsync(true)
	v := mustCreate(t, s, "v").GetVolumeId()
	busy := fmt.Errorf("%w: %w", cloud.ErrWaitBusy, cloud.NewError(cloud.CodeThrottled, "2 waits are open"))
	f.FailNext(cloudOpWaitVolume, busy, busy)
	wantCode(t, transition(t, s, f, v, false, ""), codes.OK)
	wantCode(t, transition(t, s, f, v, true, ""), codes.OK)
	if s.noWait.Load() {
		t.Error("a busy cloud was taken for one without waits")
	}
}

// TestWaitErrorsKeepTheirCodes: a wait that fails answers publish and unpublish with the
// codes a failed look at the volume gave before waits: the cloud's error mapped as for any
// call, a volume gone during an unpublish is OK (detached), and an attach or detach the cloud
// ends in error has its failure's code.
func TestWaitErrorsKeepTheirCodes(t *testing.T) {
	for _, tc := range []struct {
		name               string
		waitErr            error
		fail               cloud.Code
		publish, unpublish codes.Code
	}{
		{"unavailable", cloud.NewError(cloud.CodeUnavailable, "down"), "", codes.Unavailable, codes.Unavailable},
		{"throttled by a fault", cloud.NewError(cloud.CodeThrottled, "slow down"), "", codes.Unavailable, codes.Unavailable},
		{"gone", cloud.NewError(cloud.CodeVolumeNotFound, "gone"), "", codes.NotFound, codes.OK},
		{"attach fails: no slot", nil, cloud.CodeAttachmentLimitExceeded, codes.ResourceExhausted, codes.ResourceExhausted},
		{"fails inside the cloud", nil, cloud.CodeInternalError, codes.Internal, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := newController(t)
			f.SetAsync(true)
			v := mustCreate(t, s, "v").GetVolumeId()
			if tc.waitErr != nil {
				f.FailNext(cloudOpWaitVolume, tc.waitErr)
			}
			wantCode(t, transition(t, s, f, v, false, tc.fail), tc.publish)
			// Attached for the unpublish, whatever the publish answered.
			f.SetAsync(false)
			if _, err := f.Attach(context.Background(), v, cloud.AttachRequest{InstanceID: "i-1"}); err != nil {
				t.Fatal(err)
			}
			f.SetAsync(true)
			if tc.waitErr != nil {
				f.FailNext(cloudOpWaitVolume, tc.waitErr)
			}
			wantCode(t, transition(t, s, f, v, true, tc.fail), tc.unpublish)
		})
	}
}

// TestTransitionDelay: the pauses between waitTransition's looks: none before a wait (the
// cloud's wait is the pause), and before each poll transitionPollMin, doubling, up to
// transitionPollMax; a wait between two polls neither uses up nor restarts the polls' pauses.
func TestTransitionDelay(t *testing.T) {
	poll := true
	next := transitionDelay(&poll)
	var got []time.Duration
	for range 7 {
		got = append(got, next())
	}
	poll = false
	got = append(got, next())
	poll = true
	got = append(got, next())
	ms := time.Millisecond
	want := []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, 0, time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pauses %v, want %v", got, want)
	}
}

// TestWaitTransitionEnds: a wait that outlasts its deadline ends with errStillRunning (the
// caller answers DEADLINE_EXCEEDED: still in progress), one whose caller went away with the
// caller's context.Canceled, through the cloud's wait and while polling alike; the volume
// stays attaching.
func TestWaitTransitionEnds(t *testing.T) {
	for _, poll := range []bool{false, true} {
		for _, cancelled := range []bool{false, true} {
			t.Run(fmt.Sprintf("poll=%v,cancelled=%v", poll, cancelled), func(t *testing.T) {
				s, f := newController(t)
				f.SetAsync(true)
				v := mustCreate(t, s, "v").GetVolumeId()
				if _, err := f.Attach(context.Background(), v, cloud.AttachRequest{InstanceID: "i-1"}); err != nil {
					t.Fatal(err)
				}
				s.noWait.Store(poll)
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				want := errStillRunning
				if cancelled {
					ctx, cancel = context.WithCancel(context.Background())
					defer cancel()
					time.AfterFunc(100*time.Millisecond, cancel)
					want = context.Canceled
				}
				got, err := s.waitTransition(ctx, v, "i-1", cloud.StateAttaching)
				if !errors.Is(err, want) || got != nil {
					t.Fatalf("waitTransition = %+v, %v; want nil, %v", got, err, want)
				}
				awaitState(t, f, v, cloud.StateAttaching)
			})
		}
	}
}
