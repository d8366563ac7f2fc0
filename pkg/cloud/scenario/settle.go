package scenario

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Fleet is what a Settler reads: the fake cloud's fault rules and the node plugins its
// console relays (fakecloud --console-node); *cloud.Client has it.
type Fleet interface {
	ListFaults(ctx context.Context) ([]cloud.FaultRule, error)
	ConsoleNodes(ctx context.Context) ([]cloud.ConsoleNode, error)
	ConsoleNodeCapacity(ctx context.Context, name string, out any) error
}

// NodeState is the part of a node plugin's GET /debug/capacity (the driver's
// capacity.DebugInfo) that a Settler reads.
type NodeState struct {
	Mode            string `json:"mode"`
	Reported        int64  `json:"reported"`
	Target          *int64 `json:"target"`
	StabilityWindow string `json:"stabilityWindow"`
	Damping         int    `json:"damping"`
	// SettledInSeconds is how long until flap damping no longer changes the plugin's
	// timing; 0 when it does not.
	SettledInSeconds float64 `json:"settledInSeconds"`
}

// Settler waits, before a scenario's first step, until what earlier experiments left behind
// has gone, so that the outcome in the scenario's header holds whatever ran before it. The
// node plugins keep flap damping in memory (the driver's capacity policy: an increase undone
// within --capacity-max-stability-window doubles the stability window, which decays by half
// every 3 such windows), so a scenario right after another would see longer windows than
// its header says; a fault rule with an expiry (attach-failure-storm's ttlSeconds: 60)
// outlives the scenario that added it. The fake cloud keeps no other timing state.
type Settler struct {
	Fleet Fleet
	// Now and Sleep are the clock, as Runner's.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Every is how often the fleet is read and Report told what is waited for; 0 means
	// DefaultProgressEvery.
	Every time.Duration
	// Timeout bounds the wait. A wait known to need longer fails at once.
	Timeout time.Duration
	// Report is told what the wait is about (a line each time), and of plugins that cannot
	// be read; nil: nothing.
	Report func(msg string)
}

// Wait returns nil once the fleet is settled: no live fault rule has an expiry, and every
// node plugin the fake cloud relays is in mode fresh with no flap damping left
// (NodeState.SettledInSeconds 0). A plugin that cannot be read is reported and left out, as
// is the whole check of plugins when the fake cloud relays none (Report says so). It
// returns a *SettleError when the fleet is not settled within Timeout, at once when a known
// wait is longer, or ctx's error.
func (s *Settler) Wait(ctx context.Context) error {
	now, sleep, every := clockOrDefaults(s.Now, s.Sleep, s.Every)
	report := func(format string, args ...any) {
		if s.Report != nil {
			s.Report(fmt.Sprintf(format, args...))
		}
	}
	deadline := now().Add(s.Timeout)
	nodes, err := s.Fleet.ConsoleNodes(ctx)
	if err != nil {
		return fmt.Errorf("list the node plugins the fake cloud relays: %w", err)
	}
	if len(nodes) == 0 {
		report("the fake cloud relays no node plugin (fakecloud --console-node): cannot check that the plugins are settled; the outcome in the file's header assumes they are")
	}
	unreadable := map[string]bool{}
	for {
		t := now()
		waits, known, err := s.look(ctx, t, nodes, func(name string, err error) {
			if !unreadable[name] {
				report("node %s: cannot read its capacity state, left out of the check: %v", name, err)
				unreadable[name] = true
			}
		}, func(name string, _ NodeState) { delete(unreadable, name) })
		if err != nil {
			return err
		}
		if len(waits) == 0 {
			return nil
		}
		left := deadline.Sub(t)
		if known > left || left <= 0 {
			return &SettleError{Timeout: s.Timeout, Waits: waits, Known: known}
		}
		report("waiting for the fleet to settle: %s", strings.Join(waits, "; "))
		if err := sleep(ctx, min(every, left)); err != nil {
			return err
		}
	}
}

// look reads the fleet once at t: what is still waited for (one entry per fault rule or
// node) and the longest wait whose end is known. unreadable is told of a plugin that cannot
// be read, read of each plugin read.
func (s *Settler) look(ctx context.Context, t time.Time, nodes []cloud.ConsoleNode,
	unreadable func(name string, err error), read func(name string, st NodeState)) (waits []string, known time.Duration, err error) {
	faults, err := s.Fleet.ListFaults(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list fault rules: %w", err)
	}
	for _, f := range faults {
		if f.ExpiresAt == nil || !f.ExpiresAt.After(t) {
			continue
		}
		d := f.ExpiresAt.Sub(t)
		known = max(known, d)
		waits = append(waits, fmt.Sprintf("fault rule %s (%s %s) expires in %v", f.ID, f.Operation, f.Error, d.Round(time.Second)))
	}
	for _, n := range nodes {
		var st NodeState
		if err := s.Fleet.ConsoleNodeCapacity(ctx, n.Name, &st); err != nil {
			unreadable(n.Name, err)
			continue
		}
		read(n.Name, st)
		switch {
		case st.SettledInSeconds > 0 && st.Damping > 0:
			d := time.Duration(st.SettledInSeconds * float64(time.Second))
			known = max(known, d)
			waits = append(waits, fmt.Sprintf("node %s: flap damping (window %s, damping %d) settles in %v", n.Name, st.StabilityWindow, st.Damping, d.Round(time.Second)))
		case st.SettledInSeconds > 0:
			d := time.Duration(st.SettledInSeconds * float64(time.Second))
			known = max(known, d)
			waits = append(waits, fmt.Sprintf("node %s: raised its value lately (a decrease now would count as a flap and double its window), settles in %v", n.Name, d.Round(time.Second)))
		case st.Mode != "fresh":
			target := "?"
			if st.Target != nil {
				target = fmt.Sprint(*st.Target)
			}
			waits = append(waits, fmt.Sprintf("node %s: mode %s (reported %d, target %s)", n.Name, st.Mode, st.Reported, target))
		}
	}
	return waits, known, nil
}

// Look reads the fleet once, without waiting (for a run that starts at once,
// --settle-timeout=0): nodes has one line per node plugin the fake cloud relays (its mode,
// reported value, stability window and flap damping, or why it cannot be read), waits what
// Wait would still wait for (empty: settled). The outcome in a scenario's header assumes an
// empty waits.
func (s *Settler) Look(ctx context.Context) (nodes, waits []string, err error) {
	now, _, _ := clockOrDefaults(s.Now, s.Sleep, s.Every)
	cn, err := s.Fleet.ConsoleNodes(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list the node plugins the fake cloud relays: %w", err)
	}
	waits, _, err = s.look(ctx, now(), cn, func(name string, err error) {
		nodes = append(nodes, fmt.Sprintf("node %s: cannot read its capacity state: %v", name, err))
	}, func(name string, st NodeState) {
		line := fmt.Sprintf("node %s: mode %s, reported %d, stability window %s", name, st.Mode, st.Reported, st.StabilityWindow)
		if st.Damping > 0 {
			line += fmt.Sprintf(" (flap damping %d, settles in %v)", st.Damping, time.Duration(st.SettledInSeconds*float64(time.Second)).Round(time.Second))
		}
		nodes = append(nodes, line)
	})
	return nodes, waits, err
}

// SettleError says that a fleet did not settle within a Settler's Timeout, and why.
type SettleError struct {
	Timeout time.Duration
	// Waits are what is still waited for, one entry per rule or node.
	Waits []string
	// Known is the longest wait whose end is known (0: none known).
	Known time.Duration
}

func (e *SettleError) Error() string {
	msg := fmt.Sprintf("not settled within %v: %s", e.Timeout, strings.Join(e.Waits, "; "))
	if e.Known > e.Timeout {
		msg += fmt.Sprintf(" (%v at least); restart the node plugins to start them afresh (flap damping lives in their memory only)", e.Known.Round(time.Second))
	}
	return msg
}
