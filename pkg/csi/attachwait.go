package csi

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	transitionPollMin = 50 * time.Millisecond
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
// first, or the cloud's error of a look. It waits through the cloud's wait, again and again
// while the cloud answers that its bound came first; it polls GetVolume instead once the
// cloud said it has no waits (remembered: the cloud does not change without a restart of
// this process's peer, and a poll is still right then), and for one look after the cloud
// said it holds all the waits it may. The cloud completes the transition whether or not
// anyone waits, so giving up here abandons nothing.
func (s *ControllerServer) waitTransition(ctx context.Context, volID, nodeID string, from cloud.AttachState) (*cloud.Volume, error) {
	wctx, cancel := waitContext(ctx)
	defer cancel()
	want := cloud.StateAttached
	if from == cloud.StateDetaching {
		want = cloud.StateDetached
	}
	timer := time.NewTimer(transitionPollMin)
	defer timer.Stop()
	delay := transitionPollMin
	// poll: the next look is a GetVolume after delay, not a wait at once.
	poll := s.noWait.Load()
	for {
		if poll {
			timer.Reset(delay)
			select {
			case <-wctx.Done():
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, errStillRunning
			case <-timer.C:
			}
			delay = min(2*delay, transitionPollMax)
		}
		var (
			v   *cloud.Volume
			err error
		)
		if poll {
			v, err = s.cloud.GetVolume(wctx, volID)
			poll = s.noWait.Load()
		} else {
			deadline, _ := wctx.Deadline()
			v, err = s.cloud.WaitVolume(wctx, volID, cloud.VolumeWait{For: want, InstanceID: nodeID, Timeout: time.Until(deadline)})
			switch {
			case errors.Is(err, cloud.ErrWaitUnsupported):
				if !s.noWait.Swap(true) {
					klog.FromContext(ctx).Info("The cloud does not support waiting for an attach or detach; polling instead", "volumeID", volID)
				}
				poll = true
				continue
			case errors.Is(err, cloud.ErrWaitBusy):
				klog.FromContext(ctx).V(4).Info("The cloud holds all the waits it may; polling once", "volumeID", volID, "nodeID", nodeID)
				poll = true
				continue
			}
		}
		if err := s.ok(err); err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return nil, errStillRunning
			}
			return nil, err
		}
		if v.State != from || v.AttachedTo != nodeID {
			return v, nil
		}
	}
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
