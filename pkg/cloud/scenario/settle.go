package scenario

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

// Fleet is what a Settler reads: the fake cloud's fault rules and the node plugins its
// console relays (fakecloud --console-node); *admin.Client has it.
type Fleet interface {
	ListFaults(ctx context.Context) ([]cloud.FaultRule, error)
	ConsoleNodes(ctx context.Context) ([]admin.ConsoleNode, error)
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
	Config           struct {
		// StabilityWindow and MaxStabilityWindow are the configured windows (Go
		// durations): a raise starts a MaxStabilityWindow during which a decrease is a flap,
		// unless the two are equal (no flap damping).
		StabilityWindow    string `json:"stabilityWindow"`
		MaxStabilityWindow string `json:"maxStabilityWindow"`
	} `json:"config"`
}

// afterRaise is how long a raise keeps the plugin from being settled (a decrease within it is
// a flap): its MaxStabilityWindow, 0 when it has no flap damping or does not say.
func (st NodeState) afterRaise() time.Duration {
	maxW, err1 := time.ParseDuration(st.Config.MaxStabilityWindow)
	w, err2 := time.ParseDuration(st.Config.StabilityWindow)
	if err1 != nil || err2 != nil || w <= 0 || maxW <= w {
		return 0
	}
	return maxW
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
	// Skip, when set, ends the first line of a wait: how to start without it (the command's
	// flag), so that a reader knows before the wait, not after it.
	Skip string
	// Report is told what the wait is about: up front how long it will be and why (one line
	// per plugin or rule waited for), then a short line each time the fleet is read, and of
	// plugins that cannot be read; nil: nothing.
	Report func(msg string)
}

// fleetItem is one node plugin or fault rule as a Settler sees it at one instant.
type fleetItem struct {
	// name is the plugin's node or "fault rule ID".
	name string
	// line is its state in the one wording used wherever it is printed (Look's summary, the
	// first line of a wait, a SettleError): "node-a1: reports 3, mode fresh, stability window
	// 30s; settled".
	line string
	// settled says it does not hold a scenario back; in is then 0.
	settled bool
	// in is how long until it is settled, when known (> 0); 0 with settled false: unknown
	// (a plugin not in mode fresh settles when it is, which no one can say in advance).
	in time.Duration
	// atLeast says in is a lower bound: a plugin still ramping raises its value again, and
	// is settled a MaxStabilityWindow after its last raise.
	atLeast bool
}

// short is the item in a progress line: "node-a2 in 3m36s", "node-b1 (mode ramping)".
func (it fleetItem) short() string {
	// Whole seconds, tenths in the last two (not "in 0s" while it still waits).
	in := it.in.Round(time.Second)
	if it.in < 2*time.Second {
		in = it.in.Round(100 * time.Millisecond)
	}
	switch {
	case it.in > 0 && it.atLeast:
		return fmt.Sprintf("%s in %v at least", it.name, in)
	case it.in > 0:
		return fmt.Sprintf("%s in %v", it.name, in)
	}
	return it.name + " (not in mode fresh yet)"
}

// describeNode is the plugin of node name in state st. Its wording names each state once:
// the line says whether the plugin is settled and, when it is not, why and for how long,
// so that a list of plugins never calls "fresh" one that it then waits for.
func describeNode(name string, st NodeState) fleetItem {
	line := fmt.Sprintf("%s: reports %d, mode %s", name, st.Reported, st.Mode)
	if st.Target != nil && *st.Target != st.Reported {
		line += fmt.Sprintf(" (the cloud's value: %d)", *st.Target)
	}
	line += ", stability window " + st.StabilityWindow
	if st.Damping > 0 {
		line += fmt.Sprintf(" (flap damping %d)", st.Damping)
	}
	in := time.Duration(st.SettledInSeconds * float64(time.Second))
	if in < 0 {
		in = 0
	}
	var why []string
	switch {
	case in > 0 && st.Damping > 0:
		why = append(why, fmt.Sprintf("settles in %v, when its flap damping has decayed", in.Round(time.Second)))
	case in > 0:
		why = append(why, fmt.Sprintf("settles in %v: it raised its value lately, and a decrease before then would count as a flap and double its window",
			in.Round(time.Second)))
	}
	atLeast := false
	switch {
	case st.Mode == "ramping" && st.afterRaise() > 0:
		// It raises its value again before it is fresh, and a raise keeps it from being
		// settled for a MaxStabilityWindow.
		in, atLeast = max(in, st.afterRaise()), true
		why = append(why, fmt.Sprintf("not settled until it is in mode fresh and %v past its last raise (at least %v from now)",
			st.afterRaise(), in.Round(time.Second)))
	case st.Mode != "fresh":
		why = append(why, "not settled until it is in mode fresh")
	}
	if len(why) == 0 {
		return fleetItem{name: name, line: line + "; settled", settled: true}
	}
	return fleetItem{name: name, line: line + "; " + strings.Join(why, "; "), in: in, atLeast: atLeast}
}

// describeFault is a live fault rule with an expiry, ending in d.
func describeFault(f cloud.FaultRule, d time.Duration) fleetItem {
	name := "fault rule " + f.ID
	return fleetItem{name: name, line: fmt.Sprintf("%s (%s %s) expires in %v", name, f.Operation, f.Error, d.Round(time.Second)), in: d}
}

// waitsOf is what items still waits for, and the longest known wait.
func waitsOf(items []fleetItem) (waits []fleetItem, known time.Duration, unknown bool) {
	for _, it := range items {
		if it.settled {
			continue
		}
		waits = append(waits, it)
		known = max(known, it.in)
		unknown = unknown || it.in == 0 || it.atLeast
	}
	return waits, known, unknown
}

// Wait returns nil once the fleet is settled: no live fault rule has an expiry, and every
// node plugin the fake cloud relays is in mode fresh with no flap damping left
// (NodeState.SettledInSeconds 0). A plugin that cannot be read is reported and left out, as
// is the whole check of plugins when the fake cloud relays none (Report says so). When the
// fleet is not settled, Report is told first how long the wait will be and why, one line per
// plugin or rule, then a short line each Every. It returns a *SettleError when the fleet is
// not settled within Timeout, at once when a known wait is longer, or ctx's error.
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
	for first := true; ; first = false {
		t := now()
		items, err := s.look(ctx, t, nodes, func(name string, err error) {
			if !unreadable[name] {
				report("%s: cannot read its capacity state, left out of the check: %v", name, err)
				unreadable[name] = true
			}
		}, func(name string) { delete(unreadable, name) })
		if err != nil {
			return err
		}
		waits, known, unknown := waitsOf(items)
		if len(waits) == 0 {
			return nil
		}
		left := deadline.Sub(t)
		if known > left || left <= 0 {
			return &SettleError{Timeout: s.Timeout, Waits: lines(waits), Known: known, Skip: s.Skip}
		}
		if first {
			report("%s", s.upFront(waits, known, unknown))
		} else {
			short := make([]string, len(waits))
			for i, w := range waits {
				short[i] = w.short()
			}
			report("waiting for the fleet to settle: %s", strings.Join(short, ", "))
		}
		if err := sleep(ctx, min(every, left)); err != nil {
			return err
		}
	}
}

// upFront is the first line of a wait: how long it will be, why, and how to skip it.
func (s *Settler) upFront(waits []fleetItem, known time.Duration, unknown bool) string {
	var how string
	switch {
	case !unknown:
		how = fmt.Sprintf("about %v", known.Round(time.Second))
	case known > 0:
		how = fmt.Sprintf("at least %v", known.Round(time.Second))
	default:
		how = "until the plugins below are in mode fresh (a ramp takes a stability window or two)"
	}
	msg := fmt.Sprintf("the fleet is not settled: waiting %s before the first step (at most %v)", how, s.Timeout)
	if s.Skip != "" {
		msg += "; " + s.Skip
	}
	return msg + ":\n  " + strings.Join(lines(waits), "\n  ")
}

func lines(items []fleetItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.line
	}
	return out
}

// look reads the fleet once at t: one item per live fault rule with an expiry, then one per
// node plugin read. unreadable is told of a plugin that cannot be read, read of each plugin
// read.
func (s *Settler) look(ctx context.Context, t time.Time, nodes []admin.ConsoleNode,
	unreadable func(name string, err error), read func(name string)) ([]fleetItem, error) {
	faults, err := s.Fleet.ListFaults(ctx)
	if err != nil {
		return nil, fmt.Errorf("list fault rules: %w", err)
	}
	var items []fleetItem
	for _, f := range faults {
		if f.ExpiresAt == nil || !f.ExpiresAt.After(t) {
			continue
		}
		items = append(items, describeFault(f, f.ExpiresAt.Sub(t)))
	}
	for _, n := range nodes {
		var st NodeState
		if err := s.Fleet.ConsoleNodeCapacity(ctx, n.Name, &st); err != nil {
			unreadable(n.Name, err)
			continue
		}
		read(n.Name)
		items = append(items, describeNode(n.Name, st))
	}
	return items, nil
}

// FleetLook is the fleet as Look read it.
type FleetLook struct {
	// Lines has one line per live fault rule with an expiry and per node plugin the fake
	// cloud relays, in the wording Wait uses (or why a plugin cannot be read).
	Lines []string
	// Plugins is how many node plugins the fake cloud relays (0: none can be checked).
	Plugins int
	// Settled is whether Wait would return at once. The outcome in a scenario's header
	// assumes it.
	Settled bool
}

// Look reads the fleet once, without waiting (for a run that starts at once,
// --settle-timeout=0).
func (s *Settler) Look(ctx context.Context) (FleetLook, error) {
	now, _, _ := clockOrDefaults(s.Now, s.Sleep, s.Every)
	cn, err := s.Fleet.ConsoleNodes(ctx)
	if err != nil {
		return FleetLook{}, fmt.Errorf("list the node plugins the fake cloud relays: %w", err)
	}
	var unread []string
	items, err := s.look(ctx, now(), cn, func(name string, err error) {
		unread = append(unread, fmt.Sprintf("%s: cannot read its capacity state: %v", name, err))
	}, func(string) {})
	if err != nil {
		return FleetLook{}, err
	}
	waits, _, _ := waitsOf(items)
	return FleetLook{Lines: append(lines(items), unread...), Plugins: len(cn), Settled: len(waits) == 0}, nil
}

// SettleError says that a fleet did not settle within a Settler's Timeout, and why.
type SettleError struct {
	Timeout time.Duration
	// Waits are what is still waited for, one line per rule or node plugin.
	Waits []string
	// Known is the longest wait whose end is known (0: none known).
	Known time.Duration
	// Skip is the Settler's: how to start without the wait.
	Skip string
}

// Error is one line per plugin or rule waited for, under what to do.
func (e *SettleError) Error() string {
	msg := fmt.Sprintf("not settled within %v", e.Timeout)
	if e.Known > e.Timeout {
		msg += fmt.Sprintf(" (%v at least): restart the node plugins to start them afresh (flap damping lives in their memory only)", e.Known.Round(time.Second))
	}
	if e.Skip != "" {
		msg += "; " + e.Skip
	}
	return msg + ":\n  " + strings.Join(e.Waits, "\n  ")
}
