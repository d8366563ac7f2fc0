// Package faults is the fake cloud's fault engine: rules that make matching operations fail
// with a cloud error code or slow down (fakecloud-api.md, "Fault rules").
//
// Rules are test configuration, so they live in memory: a restart or POST /v1/reset brings
// back exactly the seeded rules with fresh counters. Evaluation is deterministic for a given
// sequence of calls: each rule draws from its own math/rand/v2 PCG source seeded with the
// rule's Seed, and time comes from an injected clock.
package faults

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// MaxLatency bounds a rule's LatencyMS so that a typo cannot hang a client for hours.
const MaxLatency = time.Minute

// MaxTTL bounds a rule's TTLSeconds: a year is longer than any test, and a TTL meant as
// "forever" is 0.
const MaxTTL = 365 * 24 * time.Hour

// Operations are the operations a rule may target besides cloud.OperationAny. Admin
// operations (faults, quotas, instance changes, reset) are never faulted, so an outage rule
// can always be removed.
func Operations() []cloud.Operation {
	return []cloud.Operation{
		cloud.OperationCreateVolume, cloud.OperationDeleteVolume, cloud.OperationGetVolume,
		cloud.OperationListVolumes, cloud.OperationAttachVolume, cloud.OperationDetachVolume,
		cloud.OperationResizeVolume, cloud.OperationGetCapacity, cloud.OperationGetInstance,
		cloud.OperationCreateSnapshot, cloud.OperationDeleteSnapshot, cloud.OperationListSnapshots,
	}
}

// Validate reports every problem of a rule as one error: a missing or unknown operation, an
// unknown error code, a rule that does nothing (no error and no latency), a probability
// outside (0, 1], negative counts, latency outside [0, MaxLatency], a TTL outside [0, MaxTTL],
// or read-only fields set. Count and TTLSeconds 0 mean unlimited (the Go client omits zeros).
func Validate(r cloud.FaultRule) error {
	var errs []error
	switch {
	case r.Operation == "":
		errs = append(errs, fmt.Errorf("operation is required: \"*\" or one of %v", Operations()))
	case r.Operation != cloud.OperationAny && !slices.Contains(Operations(), r.Operation):
		errs = append(errs, fmt.Errorf("unknown operation %q (want \"*\" or one of %v)", r.Operation, Operations()))
	}
	if r.Error != "" && !r.Error.Known() {
		errs = append(errs, fmt.Errorf("unknown error code %q", r.Error))
	}
	if r.Error == "" && r.LatencyMS == 0 {
		errs = append(errs, errors.New("rule does nothing: set error, latencyMs or both"))
	}
	// Compared as integers: converted to a Duration first, a huge value would wrap around.
	if r.LatencyMS < 0 || int64(r.LatencyMS) > MaxLatency.Milliseconds() {
		errs = append(errs, fmt.Errorf("latencyMs must be in [0, %d], got %d", MaxLatency.Milliseconds(), r.LatencyMS))
	}
	if p := r.Probability; p != nil && (math.IsNaN(*p) || *p <= 0 || *p > 1) {
		errs = append(errs, fmt.Errorf("probability must be in (0, 1] (omit it for 1), got %v", *p))
	}
	if r.AfterCount < 0 {
		errs = append(errs, fmt.Errorf("afterCount must be >= 0, got %d", r.AfterCount))
	}
	if r.Count < 0 {
		errs = append(errs, fmt.Errorf("count must be >= 0, got %d", r.Count))
	}
	if r.TTLSeconds < 0 || int64(r.TTLSeconds) > int64(MaxTTL/time.Second) {
		errs = append(errs, fmt.Errorf("ttlSeconds must be in [0, %d] (0: no expiry), got %d", int64(MaxTTL/time.Second), r.TTLSeconds))
	}
	if r.Fired != 0 || r.ExpiresAt != nil {
		errs = append(errs, errors.New("fired and expiresAt are read only"))
	}
	return errors.Join(errs...)
}

// Call is one operation about to run, as rules see it.
type Call struct {
	Operation  cloud.Operation
	InstanceID string
	VolumeID   string
}

// Fired describes one rule that fired for a call.
type Fired struct {
	RuleID    string
	Operation cloud.Operation
	Error     cloud.Code
	Latency   time.Duration
}

// Outcome is what the rules decided for a call: wait Delay (the sum of every fired rule's
// latency), then fail with Err if it is non-nil.
type Outcome struct {
	Fired []Fired
	Delay time.Duration
	Err   *cloud.Error
}

type rule struct {
	spec    cloud.FaultRule
	matched int
	// firedBy counts firings by the operation of the call, which differs from the rule's
	// for a rule on "*"; the counts sum to spec.Fired.
	firedBy map[cloud.Operation]int
	rng     *rand.Rand
	expires time.Time // zero: never
}

// Engine holds the rules. It is safe for concurrent use.
type Engine struct {
	now func() time.Time

	mu     sync.Mutex
	rules  []*rule
	nextID int
}

// New returns an engine with no rules; now is its clock (time.Now when nil).
func New(now func() time.Time) *Engine {
	if now == nil {
		now = time.Now
	}
	return &Engine{now: now}
}

// Add validates r (InvalidArgument), assigns an ID ("fault-N") and returns the stored rule.
// A client may not choose the ID.
func (e *Engine) Add(r cloud.FaultRule) (cloud.FaultRule, error) {
	if r.ID != "" {
		return cloud.FaultRule{}, cloud.NewError(cloud.CodeInvalidArgument, "fault rule: id is assigned by the server")
	}
	if err := Validate(r); err != nil {
		return cloud.FaultRule{}, cloud.NewError(cloud.CodeInvalidArgument, "fault rule: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addLocked(r, nil), nil
}

// addLocked appends r, giving it the next "fault-N" ID that no rule has and reserved does
// not hold when it has none: seeded rules may name themselves "fault-N", and two rules with
// one ID would make their metric series collide.
func (e *Engine) addLocked(r cloud.FaultRule, reserved map[string]bool) cloud.FaultRule {
	for r.ID == "" {
		e.nextID++
		id := fmt.Sprintf("fault-%d", e.nextID)
		if !reserved[id] && e.indexLocked(id) < 0 {
			r.ID = id
		}
	}
	if r.Probability == nil {
		one := 1.0
		r.Probability = &one
	}
	seed := uint64(r.Seed)
	ru := &rule{spec: r, firedBy: map[cloud.Operation]int{}, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	if r.TTLSeconds > 0 {
		ru.expires = e.now().Add(time.Duration(r.TTLSeconds) * time.Second)
	}
	e.rules = append(e.rules, ru)
	return ru.view()
}

func (r *rule) view() cloud.FaultRule {
	out := r.spec
	p := *r.spec.Probability // callers get their own copy, not the engine's
	out.Probability = &p
	if !r.expires.IsZero() {
		t := r.expires.UTC()
		out.ExpiresAt = &t
	}
	return out
}

// Reset replaces every rule by the given ones (the seeded rules) with fresh counters. Seeded
// rules may carry their own IDs, which must be unique; the others get "fault-N" IDs numbered
// from 1 again (skipping the seeded IDs), the same after every reset.
func (e *Engine) Reset(seeded []cloud.FaultRule) error {
	var errs []error
	ids := map[string]bool{}
	for i, r := range seeded {
		if err := Validate(r); err != nil {
			errs = append(errs, fmt.Errorf("faults[%d]: %w", i, err))
		}
		if r.ID != "" && ids[r.ID] {
			errs = append(errs, fmt.Errorf("faults[%d]: duplicate id %q", i, r.ID))
		}
		ids[r.ID] = true
	}
	if err := errors.Join(errs...); err != nil {
		return cloud.NewError(cloud.CodeInvalidArgument, "seed faults: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// Numbering starts again, so a seeded rule without an ID gets the same one after every
	// reset (and restart), and scripts can name it.
	e.rules, e.nextID = nil, 0
	for _, r := range seeded {
		e.addLocked(r, ids)
	}
	return nil
}

// indexLocked returns the position of the rule with that ID, or -1.
func (e *Engine) indexLocked(id string) int {
	return slices.IndexFunc(e.rules, func(r *rule) bool { return r.spec.ID == id })
}

// List returns the live rules in creation order; expired rules are dropped.
func (e *Engine) List() []cloud.FaultRule {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expireLocked()
	out := make([]cloud.FaultRule, 0, len(e.rules))
	for _, r := range e.rules {
		out = append(out, r.view())
	}
	return out
}

// FiredCount is how often one live rule fired for calls of one operation.
type FiredCount struct {
	RuleID    string
	Operation cloud.Operation
	Count     int
}

// FiredCounts returns the firing counts of the live rules, in creation order and then by
// operation; expired rules are dropped first, so a rule's counts go when the rule goes
// (deleted, cleared, reset or expired). Operations a rule never fired for are left out.
func (e *Engine) FiredCounts() []FiredCount {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expireLocked()
	var out []FiredCount
	for _, r := range e.rules {
		for _, op := range slices.Sorted(maps.Keys(r.firedBy)) {
			out = append(out, FiredCount{RuleID: r.spec.ID, Operation: op, Count: r.firedBy[op]})
		}
	}
	return out
}

// Delete removes one rule; FaultNotFound if there is none with that ID.
func (e *Engine) Delete(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := e.indexLocked(id)
	if i < 0 {
		return cloud.NewError(cloud.CodeFaultNotFound, "fault rule %q not found", id)
	}
	e.rules = slices.Delete(e.rules, i, i+1)
	return nil
}

// Clear removes every rule, seeded or not, until the next Reset.
func (e *Engine) Clear() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules = nil
}

func (e *Engine) expireLocked() {
	now := e.now()
	e.rules = slices.DeleteFunc(e.rules, func(r *rule) bool {
		return !r.expires.IsZero() && !now.Before(r.expires)
	})
}

func (r *rule) matches(c Call) bool {
	s := r.spec
	if s.Operation != cloud.OperationAny && s.Operation != c.Operation {
		return false
	}
	if s.InstanceID != "" && s.InstanceID != c.InstanceID {
		return false
	}
	return s.VolumeID == "" || s.VolumeID == c.VolumeID
}

// Evaluate runs the rules, in creation order, against one call. A matching rule counts the
// call; it fires unless it is still within AfterCount, has fired Count times, or loses its
// probability draw. Every fired rule adds its latency; the first fired rule with an error
// decides the error and stops the evaluation.
func (e *Engine) Evaluate(c Call) Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expireLocked()
	var out Outcome
	for _, r := range e.rules {
		if !r.matches(c) {
			continue
		}
		r.matched++
		if r.matched <= r.spec.AfterCount {
			continue
		}
		if r.spec.Count > 0 && r.spec.Fired >= r.spec.Count {
			continue
		}
		if p := *r.spec.Probability; p < 1 && r.rng.Float64() >= p {
			continue
		}
		r.spec.Fired++
		r.firedBy[c.Operation]++
		latency := time.Duration(r.spec.LatencyMS) * time.Millisecond
		out.Delay += latency
		out.Fired = append(out.Fired, Fired{RuleID: r.spec.ID, Operation: c.Operation, Error: r.spec.Error, Latency: latency})
		if r.spec.Error != "" {
			out.Err = cloud.NewError(r.spec.Error, "injected by fault rule %s", r.spec.ID)
			break
		}
	}
	return out
}
