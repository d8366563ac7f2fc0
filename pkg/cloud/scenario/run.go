package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// API is the part of the fake cloud's admin API a scenario's steps use, declared here where it is
// used: *admin.Client has it (fakecloud scenario, over HTTP), and so has the server itself
// for POST /v1/scenarios (its scenarioAPI, in process). Errors are *cloud.Error values as
// the client returns them ("PATCH /v1/quotas: InvalidArgument: ..."); Unauthenticated or
// AccessDenied stops a run (AuthError).
type API interface {
	PatchInstance(ctx context.Context, id string, p cloud.InstancePatch) (*cloud.Instance, error)
	PatchQuotas(ctx context.Context, p cloud.QuotasPatch) (*cloud.Quotas, error)
	CreateFault(ctx context.Context, r cloud.FaultRule) (*cloud.FaultRule, error)
	DeleteFault(ctx context.Context, id string) error
	ClearFaults(ctx context.Context) error
	Reset(ctx context.Context) error
}

// Runner runs scenarios against one fake cloud.
type Runner struct {
	// API is the fake cloud, with an admin token.
	API API
	// Now and Sleep are the clock; Sleep must return ctx.Err() when ctx ends first. Defaults:
	// time.Now and a timer.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Report is told about each step after it ran (err nil) or failed; nil: nothing.
	Report func(at time.Duration, s Step, err error)
	// Waiting is told, while Run waits for its next step, which step that is, its offset
	// and how long until it runs: when a wait longer than ProgressEvery begins and then
	// every ProgressEvery until the step, so that a watcher hears from the run at least
	// that often; nil: nothing.
	Waiting func(next Step, at, in time.Duration)
	// ProgressEvery is how often Waiting is told; 0 means DefaultProgressEvery.
	ProgressEvery time.Duration
}

// DefaultProgressEvery is Runner.ProgressEvery's default: a line every 10 s while a run waits.
const DefaultProgressEvery = 10 * time.Second

// minWaitLine is the shortest rest of a wait that Runner.Waiting is told of.
const minWaitLine = 100 * time.Millisecond

// AuthError is the error Run returns when the cloud refused a step's token (Unauthenticated
// or AccessDenied): every later step would be refused too, so the run stops there.
type AuthError struct {
	// At and Step are the refused step.
	At   time.Duration
	Step Step
	// Err is the cloud's answer.
	Err error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("token rejected (%d %s) by the step at +%v: %v; a scenario needs an admin token, no later step was tried",
		cloud.CodeOf(e.Err).HTTPStatus(), cloud.CodeOf(e.Err), e.At, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// Run runs sc's steps at their offsets from now, in order. A failed step is reported and
// the run goes on (an experiment should not stop halfway because one rule was already gone),
// except when the cloud refused the token (*AuthError: every later step would fail the same
// way); Run returns the number of failed steps as an error at the end, or ctx.Err() when ctx
// ends first.
func (r *Runner) Run(ctx context.Context, sc *Scenario) error {
	now, sleep, every := clockOrDefaults(r.Now, r.Sleep, r.ProgressEvery)
	start := now()
	refs := map[string]string{} // fault ref → rule ID
	failed := 0
	for _, s := range sc.Steps {
		at := time.Duration(s.At)
		// A wait longer than every is said at its start and then after each every, the
		// last stretch included, so that no silence is longer than every (a remainder
		// under minWaitLine is not worth a line).
		saying := false
		for wait := at - now().Sub(start); wait > 0; wait = at - now().Sub(start) {
			d := wait
			if r.Waiting != nil && (wait > every || saying && wait >= minWaitLine) {
				saying = true
				r.Waiting(s, at, wait)
				d = min(wait, every)
			}
			if err := sleep(ctx, d); err != nil {
				// The cloud keeps what the steps before this one did: say so, and the way back.
				return fmt.Errorf("scenario %s stopped before the step at %v; the steps before it stay applied (POST /v1/reset goes back to the seed): %w", cloud.Quote(sc.Name), at, err)
			}
		}
		err := r.step(ctx, s, refs)
		if err != nil {
			failed++
		}
		if r.Report != nil {
			r.Report(at, s, err)
		}
		if c := cloud.CodeOf(err); c == cloud.CodeUnauthenticated || c == cloud.CodeAccessDenied {
			return fmt.Errorf("scenario %s: %w", cloud.Quote(sc.Name), &AuthError{At: at, Step: s, Err: err})
		}
	}
	if failed > 0 {
		return fmt.Errorf("scenario %s: %d of %s failed", cloud.Quote(sc.Name), failed, plural.Of(len(sc.Steps), "step", "steps"))
	}
	return nil
}

func (r *Runner) step(ctx context.Context, s Step, refs map[string]string) error {
	switch {
	case s.Instance != nil:
		_, err := r.API.PatchInstance(ctx, s.Instance.ID, s.Instance.InstancePatch)
		return err
	case s.Quotas != nil:
		_, err := r.API.PatchQuotas(ctx, *s.Quotas)
		return err
	case s.Fault != nil:
		rule, err := r.API.CreateFault(ctx, s.Fault.FaultRule)
		if err != nil {
			return err
		}
		if s.Fault.Ref != "" {
			refs[s.Fault.Ref] = rule.ID
		}
		return nil
	case s.DeleteFault != "":
		id, ok := refs[s.DeleteFault]
		if !ok {
			return fmt.Errorf("fault %s was not created (its step failed)", cloud.Quote(s.DeleteFault))
		}
		return r.API.DeleteFault(ctx, id)
	case s.ClearFaults:
		return r.API.ClearFaults(ctx)
	case s.Reset:
		return r.API.Reset(ctx)
	default:
		return fmt.Errorf("step without an action") // Parse refuses these
	}
}

// clockOrDefaults fills in what a Runner or Settler left zero: time.Now, a timer, and
// DefaultProgressEvery for a progress interval that is not positive.
func clockOrDefaults(now func() time.Time, sleep func(context.Context, time.Duration) error, every time.Duration) (func() time.Time, func(context.Context, time.Duration) error, time.Duration) {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = sleepTimer
	}
	if every <= 0 {
		every = DefaultProgressEvery
	}
	return now, sleep, every
}

func sleepTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
