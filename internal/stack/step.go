package stack

import (
	"context"
	"time"
)

// Step is one start-up action: Start begins it, Ready waits until it serves (nil: ready
// once Start returns).
type Step struct {
	// Name says what the step starts, in progress lines and errors ("fake cloud").
	Name string
	// Start starts the component and returns without waiting for it to serve.
	Start func(ctx context.Context) error
	// Ready returns nil once the component serves, or an error when ctx ends first.
	Ready func(ctx context.Context) error
}

// StepError is Run's error: the step that failed, and whether its Start or its Ready did.
type StepError struct {
	// Step is the failed step's Name.
	Step string
	// Ready is true when the step started but did not turn ready.
	Ready bool
	// Err is what Start or Ready returned.
	Err error
}

// Error reads "<step>: <err>", or "<step> not ready: <err>" when Ready failed.
func (e *StepError) Error() string {
	if e.Ready {
		return e.Step + " not ready: " + e.Err.Error()
	}
	return e.Step + ": " + e.Err.Error()
}

// Unwrap returns Err, so errors.Is and errors.As see the step's own error.
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
