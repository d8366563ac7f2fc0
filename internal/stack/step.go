package stack

import (
	"context"
	"fmt"
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

// Run runs steps in order, each Start then its Ready, and stops at the first error, which
// names the step. done, when not nil, is told of each step that is ready and how long it
// took. What the steps started stays started: stopping it is the launcher's (it knows
// how).
func Run(ctx context.Context, steps []Step, done func(name string, took time.Duration)) error {
	for _, s := range steps {
		t := time.Now()
		if err := s.Start(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		if s.Ready != nil {
			if err := s.Ready(ctx); err != nil {
				return fmt.Errorf("%s not ready: %w", s.Name, err)
			}
		}
		if done != nil {
			done(s.Name, time.Since(t))
		}
	}
	return nil
}
