package stack

import (
	"context"
	"time"
)

// Step is one start-up action: Start begins it, Ready waits until it serves (nil: ready
// once Start returns).
type Step struct {
	// Name says what the step starts, in progress lines and errors ("fake cloud").
	Name  string
	Start func(ctx context.Context) error
	Ready func(ctx context.Context) error
}

// StepError is Run's error: the step that failed, and whether its Start or its Ready did.
type StepError struct {
	Step string
	// Ready is true when the step started but did not turn ready.
	Ready bool
	Err   error
}

func (e *StepError) Error() string {
	if e.Ready {
		return e.Step + " not ready: " + e.Err.Error()
	}
	return e.Step + ": " + e.Err.Error()
}

func (e *StepError) Unwrap() error { return e.Err }

// Run runs steps in order, each Start then its Ready, and stops at the first error, a
// *StepError that names the step. done, when not nil, is told of each step that is ready and how long it
// took. What the steps started stays started: stopping it is the launcher's (it knows
// how).
func Run(ctx context.Context, steps []Step, done func(name string, took time.Duration)) error {
	for _, s := range steps {
		t := time.Now()
		if err := s.Start(ctx); err != nil {
			return &StepError{Step: s.Name, Err: err}
		}
		if s.Ready != nil {
			if err := s.Ready(ctx); err != nil {
				return &StepError{Step: s.Name, Ready: true, Err: err}
			}
		}
		if done != nil {
			done(s.Name, time.Since(t))
		}
	}
	return nil
}
