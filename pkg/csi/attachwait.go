package csi

import (
	"context"
	"errors"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// How ControllerPublishVolume and ControllerUnpublishVolume wait for the cloud's attach or
// detach (docs/attach.md, "Driver"): through the cloud's wait (cloud.Client.WaitVolume, a GET
// the cloud answers when the transition ends), so that the answer comes within milliseconds
// of the cloud's transition. Against a cloud without waits (an older fake cloud) or one
// holding all the waits it may, they look at the volume instead, after transitionPollMin,
// then ever less often, up to transitionPollMax between two looks.
const (
	transitionPollMin = 50 * time.Millisecond //nolint:revive // Min: the minimum, not minutes
	transitionPollMax = time.Second
)

// Answering before the caller's deadline: the wait ends answerMargin before it (at most a
// tenth of the time the call had), so the caller reads a DEADLINE_EXCEEDED that says the
// operation goes on instead of cutting the call itself. A call without a deadline waits at
// most maxTransitionWait.
const (
	answerMargin      = time.Second
	maxTransitionWait = 2 * time.Minute
)

// errStillRunning is the end of a wait whose deadline came first.
var errStillRunning = errors.New("transition still under way")

// waitContext is ctx with the deadline of a wait for a transition: answerMargin (at most a
// tenth of the time left) before ctx's, or maxTransitionWait without one.
func waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithTimeout(ctx, maxTransitionWait)
	}
	left := time.Until(deadline)
	return context.WithDeadline(ctx, deadline.Add(-min(answerMargin, left/10)))
}

// waitTransition waits until the volume has left state from on nodeID (attaching or
// detaching) and returns it as last seen, errStillRunning when the wait's deadline came
// first, the caller's context's error when it ended, or the cloud's error of a look. It
// waits through the cloud's wait, again and again while the cloud answers that its bound
// came first; it polls GetVolume instead once the cloud said it has no waits (remembered: the
// cloud does not change without a restart of this process's peer, and a poll is still right
// then), and for one look after the cloud said it holds all the waits it may. The cloud
// completes the transition whether or not anyone waits, so giving up here abandons nothing.
func (s *ControllerServer) waitTransition(ctx context.Context, volID, nodeID string, from cloud.AttachState) (*cloud.Volume, error) {
	wctx, cancel := waitContext(ctx)
	defer cancel()
	want := cloud.StateAttached
	if from == cloud.StateDetaching {
		want = cloud.StateDetached
	}
	// poll: the next look is a GetVolume after a pause, not a wait at once.
	poll := s.noWait.Load()
	var (
		v       *cloud.Volume
		lookErr error
	)
	err := transitionDelay(&poll).Until(wctx, !poll, true, func(wctx context.Context) (bool, error) {
		v, lookErr = s.lookTransition(wctx, volID, nodeID, want, &poll)
		if lookErr != nil {
			return false, lookErr
		}
		return v != nil && (v.State != from || v.AttachedTo != nodeID), nil
	})
	switch {
	case err == nil:
		return v, nil
	case wctx.Err() != nil && ctx.Err() == nil:
		return nil, errStillRunning
	case lookErr != nil:
		return nil, lookErr
	}
	return nil, ctx.Err()
}

// transitionDelay is the pause before waitTransition's next look: none before a wait (the
// cloud's wait is the pause), and before a poll transitionPollMin, doubling with each poll up
// to transitionPollMax. poll is read at each pause (lookTransition sets it).
func transitionDelay(poll *bool) wait.DelayFunc {
	backoff := wait.Backoff{Duration: transitionPollMin, Factor: 2, Cap: transitionPollMax, Steps: math.MaxInt32}.DelayFunc()
	return func() time.Duration {
		if !*poll {
			return 0
		}
		return backoff()
	}
}

// lookTransition is one look of waitTransition, bounded by ctx's deadline: a GetVolume when
// *poll, else the cloud's wait for want on nodeID. It returns the volume, or nil and no error
// when the cloud would not wait (it has no waits, or holds all it may: *poll becomes true for
// the next look), or the cloud's error.
func (s *ControllerServer) lookTransition(ctx context.Context, volID, nodeID string, want cloud.AttachState, poll *bool) (*cloud.Volume, error) {
	if *poll {
		v, err := s.cloud.GetVolume(ctx, volID)
		*poll = s.noWait.Load()
		return v, s.ok(err)
	}
	deadline, _ := ctx.Deadline()
	v, err := s.cloud.WaitVolume(ctx, volID, cloud.VolumeWait{For: want, InstanceID: nodeID, Timeout: time.Until(deadline)})
	switch {
	case errors.Is(err, cloud.ErrWaitUnsupported):
		if !s.noWait.Swap(true) {
			klog.FromContext(ctx).Info("The cloud does not support waiting for an attach or detach; polling instead", "volumeID", volID)
		}
		*poll = true
		return nil, nil
	case errors.Is(err, cloud.ErrWaitBusy):
		klog.FromContext(ctx).V(4).Info("The cloud holds all the waits it may; polling once", "volumeID", volID, "nodeID", nodeID)
		*poll = true
		return nil, nil
	}
	return v, s.ok(err)
}

// stillRunning is the answer to a caller whose deadline comes before the cloud's attach or
// detach ends: DEADLINE_EXCEEDED, which the external-attacher reads as "may still be in
// progress" (not final: it retries, and keeps the VolumeAttachment's finalizer on a detach);
// the retry joins the transition and returns OK once it is over.
func stillRunning(what, volID, nodeID string) error {
	return status.Errorf(codes.DeadlineExceeded, "%s of %s on %s still in progress in the cloud; a retry joins it", what, volID, nodeID)
}

// transitionError is the status of a transition that ended in state error: the cloud's code
// of the failure (transitionFailure), mapped like any cloud error of the call.
func transitionError(op cloudOp, code cloud.Code, msg, format string, args ...any) error {
	return cloudStatus(op, transitionFailure(code, msg), format, args...)
}

// transitionFailure is the cloud error of a transition that ended in state error with code
// and msg; a failure without a code is the cloud's InternalError.
func transitionFailure(code cloud.Code, msg string) *cloud.Error {
	if code == "" {
		code = cloud.CodeInternalError
	}
	return cloud.NewError(code, "%s", msg)
}
