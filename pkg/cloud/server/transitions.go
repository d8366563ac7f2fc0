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
				// As a request's firings: at the default verbosity within the request log's
				// bounds, every one at -v=2.
				if logger := klog.FromContext(ctx); logger.V(2).Enabled() || s.reqlog.allow() {
					logger.Info("Fault fired", "rule", f.RuleID, "operation", f.Operation, "transition", true,
						"volumeID", call.VolumeID, "nodeID", call.InstanceID)
				}
			}
		})
		return plan
	}
}

// waker tells the transition worker what changed, so that it rescans the pending
// transitions only when it must: a started transition names its due time (the worker just
// wakes earlier if needed), anything else (a rule deleted, a reset, a transition held by a
// rule) asks for a rescan.
type waker struct {
	mu     sync.Mutex
	at     time.Time
	rescan bool
	ch     chan struct{}
}

func newWaker() *waker { return &waker{ch: make(chan struct{}, 1)} }

func (w *waker) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// take returns and clears what was asked since the last take.
func (w *waker) take() (at time.Time, rescan bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, rescan = w.at, w.rescan
	w.at, w.rescan = time.Time{}, false
	return at, rescan
}

// kick asks the transition worker to rescan: a rule that may hold a transition went, or the
// state was reset.
func (s *Server) kick() {
	s.wake.mu.Lock()
	s.wake.rescan = true
	s.wake.mu.Unlock()
	s.wake.signal()
}

// started tells the transition worker about the transition att reports: its due time, or a
// rescan for one a rule holds (the rule's expiry is the worker's to find).
func (s *Server) started(att *cloud.Attachment) {
	if !att.State.Transient() {
		return
	}
	if att.Due == nil {
		s.kick()
		return
	}
	s.wake.mu.Lock()
	if s.wake.at.IsZero() || att.Due.Before(s.wake.at) {
		s.wake.at = *att.Due
	}
	s.wake.mu.Unlock()
	s.wake.signal()
}

// operationContext is the context an attach or detach runs in: r's values, but not its
// cancellation. In a real cloud a request that arrived is carried out whether or not its
// caller waits for the answer, so a caller that times out during injected latency still gets
// its attach (docs/attach.md), unless a later request on the volume was carried out meanwhile
// (volumeOrder); only the server's shutdown stops the wait.
func (s *Server) operationContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	life := s.life.Load()
	if life == nil {
		return ctx, cancel
	}
	stop := context.AfterFunc(*life, cancel)
	return ctx, func() {
		stop()
		cancel()
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
	logger := klog.LoggerWithName(klog.FromContext(ctx), "transitions")
	if n, err := s.store.ReleaseStuck("fault rules do not survive a restart"); err != nil {
		logger.Error(err, "Releasing stuck transitions failed")
	} else if n > 0 {
		logger.Info("Released transitions held by fault rules of the previous run", "count", n)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var next time.Time
	scan := true
	for {
		if scan {
			n, due, err := s.store.CompleteDue(s.faults.Live)
			next = due
			if err != nil {
				logger.Error(err, "Completing transitions failed; retrying", "retryIn", transitionRetry)
				next = s.now().Add(transitionRetry)
			}
			if n > 0 {
				logger.V(4).Info("Transitions completed", "count", n)
			}
			scan = false
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		var tick <-chan time.Time
		if !next.IsZero() {
			timer.Reset(max(0, next.Sub(s.now())))
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake.ch:
			at, rescan := s.wake.take()
			switch {
			case rescan:
				scan = true
			case !at.IsZero() && (next.IsZero() || at.Before(next)):
				next = at
			}
		case <-tick:
			scan = true
		}
	}
}
