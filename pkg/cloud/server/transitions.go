package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// Default transition durations of the fakecloud command (--attach-duration,
// --detach-duration): long enough that every attach is seen attaching, short enough that
// tests and demos barely wait. Config's zero durations are synchronous instead.
const (
	DefaultAttachDuration = 300 * time.Millisecond
	DefaultDetachDuration = 300 * time.Millisecond
)

// transitionRetry is how long the transition worker waits after a failed commit before it
// tries again.
const transitionRetry = time.Second

// planner returns the memoized transition plan of call: the fault engine's transition rules
// are run at most once per request, and only when the store starts a transition (a repeat
// that joins one, or a refused attach, fires none). The FaultFired events go into the commit
// that starts the transition.
func (s *Server) planner(ctx context.Context, call faults.Call) store.Planner {
	var (
		once sync.Once
		plan store.TransitionPlan
	)
	return func() store.TransitionPlan {
		once.Do(func() {
			out := s.faults.EvaluateTransition(call)
			if out.HasDuration {
				d := out.Duration
				plan.Duration = &d
			}
			plan.Stuck, plan.Rule = out.Stuck, out.StuckRule
			if out.Fail != "" {
				plan.Fail, plan.Rule = out.Fail, out.FailRule
			}
			for _, f := range out.Fired[:min(len(out.Fired), MaxFiredEventsPerRequest)] {
				plan.Events = append(plan.Events, cloud.Event{Type: "FaultFired", VolumeID: call.VolumeID, InstanceID: call.InstanceID,
					Detail: fmt.Sprintf("rule=%s operation=%s transition", f.RuleID, f.Operation)})
				klog.FromContext(ctx).V(2).Info("Fault fired", "rule", f.RuleID, "operation", f.Operation, "transition", true,
					"volumeID", call.VolumeID, "nodeID", call.InstanceID)
			}
		})
		return plan
	}
}

// kick wakes the transition worker: a transition started, or a rule that may hold one went.
func (s *Server) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// attachReply is 202 while the transition runs, 200 once it is over (attached, detached, or
// error when it failed at once).
func attachReply(att *cloud.Attachment) *reply {
	status := http.StatusOK
	if att.State.Transient() {
		status = http.StatusAccepted
	}
	return &reply{status: status, body: att, rev: att.Revision}
}

// runTransitions completes attach and detach transitions when they are due, until ctx ends.
// It first releases the transitions a fault rule held before a restart (rules live in
// memory; docs/attach.md, "Restarts"), then completes what came due while the cloud was down.
// A transition's outcome is decided when it starts and stored with it, so completing it
// needs no request and no caller: it runs whether or not anyone waits for it.
func (s *Server) runTransitions(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("transitions")
	if n, err := s.store.ReleaseStuck("fault rules do not survive a restart"); err != nil {
		logger.Error(err, "Releasing stuck transitions failed")
	} else if n > 0 {
		logger.Info("Released transitions held by fault rules of the previous run", "count", n)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		n, next, err := s.store.CompleteDue(s.faults.Live)
		wait := time.Duration(-1)
		switch {
		case err != nil:
			logger.Error(err, "Completing transitions failed; retrying", "retryIn", transitionRetry)
			wait = transitionRetry
		case !next.IsZero():
			wait = max(0, next.Sub(s.now()))
		}
		if n > 0 {
			logger.V(4).Info("Transitions completed", "count", n)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		var tick <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-tick:
		}
	}
}
