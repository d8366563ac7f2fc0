// Package stack is the one definition of how the fakecloud-csi stack starts: its components
// (the fake cloud, the controller plugin, the node plugins), the flags each gets, and the
// start-up steps in order, each a named action with its own readiness check, as kind's
// cluster create runs a list of actions. make run, tests/teststack and the local cluster
// (tests/e2e/localcluster) run these steps; whether a component runs as a process or in
// process is the Launcher's business, not a second list. A launcher adds its own steps
// around them (the local cluster: a Kubernetes control plane before, the sidecars after the
// controller, its hollow kubelets and registration with the node plugins).
package stack

import (
	"context"
	"fmt"
	"time"
)

// Programs of the repository that a Component runs (cmd/<program>).
const (
	ProgramFakeCloud = "fakecloud"
	ProgramDriver    = "driver"
)

// Component is one program of the stack as a launcher starts it.
type Component struct {
	// Name says what it is in messages ("fake cloud", "node plugin node-a1").
	Name string
	// ID names the component's process, log and pid files ("fakecloud", "driver-controller").
	ID string
	// Program is ProgramFakeCloud or ProgramDriver.
	Program string
	// Args are the program's flags, as its command line takes them.
	Args []string
}

// Launcher starts one component and returns once it runs; the step's readiness check says
// when it serves. A process launcher execs cmd/<Program> with Args; an in-process one parses
// Args (or builds the equivalent configuration) and serves in a goroutine.
type Launcher interface {
	Launch(ctx context.Context, c Component) error
}

// Stack is the stack's components in start order: the fake cloud first (the plugins look
// their instances up in it at start), then the plugins, the controller before the nodes.
type Stack struct {
	Cloud   Cloud
	Plugins []Plugin
	// Timeout bounds each component's readiness wait; 0 means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is how long a component may take to turn ready (make run's 60 s).
const DefaultTimeout = time.Minute

// Steps are the stack's start-up actions in order: the fake cloud, ready once GET /readyz
// answers 200; then each plugin, ready once its socket answers a CSI Probe with ready=true
// (the controller once it reached the cloud, a node once it knows its zone).
func (s Stack) Steps(l Launcher) []Step {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	steps := []Step{{
		Name:  "fake cloud",
		Start: launch(l, Component{Name: "fake cloud", ID: s.Cloud.id(), Program: ProgramFakeCloud, Args: s.Cloud.Args()}),
		Ready: func(ctx context.Context) error { return WaitHTTP(ctx, s.Cloud.URL()+"/readyz", timeout) },
	}}
	for _, p := range s.Plugins {
		steps = append(steps, Step{
			Name:  p.Name,
			Start: launch(l, Component{Name: p.Name, ID: p.ID, Program: ProgramDriver, Args: p.Args()}),
			Ready: func(ctx context.Context) error { return WaitProbe(ctx, p.Endpoint(), timeout) },
		})
	}
	return steps
}

func launch(l Launcher, c Component) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := l.Launch(ctx, c); err != nil {
			return fmt.Errorf("launch %s: %w", c.ID, err)
		}
		return nil
	}
}
