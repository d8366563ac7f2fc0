// Package faults is the fake cloud's fault engine: rules that make matching operations fail
// with a cloud error code or slow down (docs/fakecloud-api.md, "Fault rules").
//
// Rules are test configuration, so they live in memory: a restart or POST /v1/reset brings
// back exactly the seeded rules with fresh counters. Evaluation is deterministic for a given
// sequence of calls: each rule draws from its own math/rand/v2 PCG source seeded with the
// rule's Seed, and time comes from an injected clock.
package faults

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/fieldnames"
	"github.com/fakecloud/fakecloud-csi/internal/plural"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/paging"
)

// MaxLatency bounds a rule's LatencyMS so that a typo cannot hang a client for hours, and
// also the total injected delay of one request, whatever number of rules fire for it: a
// request whose fired rules add up to more waits MaxLatency and then fails with
// Unavailable (see Outcome.Capped). The server's write timeout is longer, so the answer is
// always sent.
const MaxLatency = time.Minute

// DefaultMaxRules is how many fault rules an engine holds unless New is told otherwise;
// adding one more is ServerLimitExceeded (409). Tests need a handful; the bound keeps
// GET /v1/faults and every request's rule check small.
const DefaultMaxRules = 1000

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
		cloud.OperationResizeVolume, cloud.OperationModifyVolume, cloud.OperationGetCapacity, cloud.OperationGetInstance,
		cloud.OperationCreateSnapshot, cloud.OperationDeleteSnapshot, cloud.OperationListSnapshots,
		cloud.OperationCreateGroupSnapshot, cloud.OperationDeleteGroupSnapshot,
	}
}

// Validate reports every problem of a rule as one error: a missing or unknown operation, an
// unknown error code, an ID, instanceId or volumeId that is not an identifier
// (cloud.CheckID: at most cloud.MaxIDBytes), a rule that does nothing (no error and no
// latency), a probability outside (0, 1], negative counts, latency outside [0, MaxLatency],
// a TTL outside [0, MaxTTL], or read-only fields set. Count and TTLSeconds 0 mean unlimited
// (the Go client omits zeros). Messages quote at most a bounded prefix of any field.
func Validate(r cloud.FaultRule) error {
	var errs []error
	health := r.Health != ""
	if health {
		errs = append(errs, validateHealthRule(r)...)
	}
	switch {
	case health:
		// validateHealthRule checked the operation.
	case r.Operation == "":
		errs = append(errs, fmt.Errorf("operation is required: \"*\" or one of %v", Operations()))
	case r.Operation != cloud.OperationAny && !slices.Contains(Operations(), r.Operation):
		errs = append(errs, fmt.Errorf("unknown operation %s (want \"*\" or one of %v)%s", cloud.Quote(string(r.Operation)), Operations(),
			didYouMean(string(r.Operation), Operations())))
	}
	if r.Error != "" && !r.Error.Known() {
		errs = append(errs, fmt.Errorf("unknown error code %s (want one of %v)%s", cloud.Quote(string(r.Error)), cloud.Codes(),
			didYouMean(string(r.Error), cloud.Codes())))
	}
	for _, f := range []struct{ name, v string }{{"id", r.ID}, {"instanceId", r.InstanceID}, {"volumeId", r.VolumeID}} {
		if err := cloud.CheckOptionalID(f.name, f.v); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, validateTransition(r)...)
	if r.Transition == "" && r.Error == "" && r.LatencyMS == 0 && !health {
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

// CheckNew reports every problem of r as a rule to add (POST /v1/faults, a scenario's fault
// step), one a line: an ID set (the server assigns it), then Validate's. The fake cloud
// answers them with 400 InvalidArgument, "fault rule: " before them, and adds nothing.
func CheckNew(r cloud.FaultRule) error {
	var errs []error
	if r.ID != "" {
		errs = append(errs, errors.New("id is assigned by the server"))
	}
	return errors.Join(append(errs, Validate(r))...)
}

// didYouMean is `; did you mean "X"?` for X, the one of names v was likely meant to be
// (fieldnames.Closest, the suggestion unknown JSON fields get), or "" when none is close.
func didYouMean[T ~string](v string, names []T) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	if m := fieldnames.Closest(v, s); m != "" {
		return "; did you mean " + strconv.Quote(m) + "?"
	}
	return ""
}

// validateTransition checks the fields of a transition rule (cloud.FaultRule.Transition).
func validateTransition(r cloud.FaultRule) []error {
	var errs []error
	if r.Transition == "" {
		if r.DurationMS != 0 {
			errs = append(errs, errors.New("durationMs needs a transition (slow or fail)"))
		}
		return errs
	}
	if r.Operation != cloud.OperationAttachVolume && r.Operation != cloud.OperationDetachVolume {
		errs = append(errs, fmt.Errorf("transition %s applies to AttachVolume or DetachVolume only, not %s",
			cloud.Quote(string(r.Transition)), cloud.Quote(string(r.Operation))))
	}
	if r.LatencyMS != 0 {
		errs = append(errs, errors.New("a transition rule acts on the transition, not the request: latencyMs must be 0 (use transition slow)"))
	}
	if r.DurationMS < 0 || r.DurationMS > cloud.MaxTransitionMS {
		errs = append(errs, fmt.Errorf("durationMs must be in [0, %d], got %d", cloud.MaxTransitionMS, r.DurationMS))
	}
	switch r.Transition {
	case cloud.TransitionSlow:
		if r.DurationMS == 0 {
			errs = append(errs, errors.New("transition slow needs durationMs > 0"))
		}
		if r.Error != "" {
			errs = append(errs, errors.New("transition slow takes no error (use transition fail)"))
		}
	case cloud.TransitionStick:
		if r.DurationMS != 0 || r.Error != "" {
			errs = append(errs, errors.New("transition stick takes neither durationMs nor error: it holds the transition while the rule lives"))
		}
	case cloud.TransitionFail:
	default:
		errs = append(errs, fmt.Errorf("unknown transition %s (want slow, stick or fail)%s", cloud.Quote(string(r.Transition)),
			didYouMean(string(r.Transition), []cloud.Transition{cloud.TransitionSlow, cloud.TransitionStick, cloud.TransitionFail})))
	}
	return errs
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
	// rule is the rule as it fired, for EvaluateTransition.
	rule cloud.FaultRule
}

// Outcome is what the rules decided for a call: wait Delay (the sum of every fired rule's
// latency, at most MaxLatency), then fail with Err if it is non-nil. Capped is set when the
// fired rules asked for more than MaxLatency in total: Delay is MaxLatency and Err is
// Unavailable, saying so.
type Outcome struct {
	Fired  []Fired
	Delay  time.Duration
	Err    *cloud.Error
	Capped bool
}

type rule struct {
	spec cloud.FaultRule
	// seq is the rule's place in creation order, the order of evaluation and listing.
	seq     uint64
	matched int
	// firedBy counts firings by the operation of the call, which differs from the rule's
	// for a rule on "*"; the counts sum to spec.Fired.
	firedBy map[cloud.Operation]int
	rng     *rand.Rand
	expires time.Time // zero: never
}

// Engine holds the rules. It is safe for concurrent use.
type Engine struct {
	now      func() time.Time
	maxRules int

	mu    sync.Mutex
	rules []*rule // creation order
	// byOp indexes the rules by their operation ("*" included), each in creation order, so
	// a call looks only at the rules that can match it.
	byOp    map[cloud.Operation][]*rule
	nextID  int
	nextSeq uint64
	// volHealth and instHealth are the health set by SetVolumeHealth and
	// SetInstanceHealth, by object ID; never "ok" (which deletes the entry).
	volHealth, instHealth map[string]HealthState
}

// New returns an engine with no rules that holds at most DefaultMaxRules; now is its clock
// (time.Now when nil).
func New(now func() time.Time) *Engine { return NewWithLimit(now, DefaultMaxRules) }

// NewWithLimit is New holding at most maxRules rules (DefaultMaxRules when ≤ 0). Seeded rules
// count against the limit too.
func NewWithLimit(now func() time.Time, maxRules int) *Engine {
	if now == nil {
		now = time.Now
	}
	if maxRules <= 0 {
		maxRules = DefaultMaxRules
	}
	return &Engine{now: now, maxRules: maxRules, byOp: map[cloud.Operation][]*rule{}}
}

// MaxRules is how many rules the engine holds at most.
func (e *Engine) MaxRules() int { return e.maxRules }

// Add validates r (InvalidArgument), assigns an ID ("fault-N") and returns the stored rule.
// A client may not choose the ID. With MaxRules live rules already held it is
// ServerLimitExceeded (409) and nothing changes.
func (e *Engine) Add(r cloud.FaultRule) (cloud.FaultRule, error) {
	if err := CheckNew(r); err != nil {
		return cloud.FaultRule{}, cloud.NewError(cloud.CodeInvalidArgument, "fault rule: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.rules) >= e.maxRules {
		e.expireLocked()
	}
	if len(e.rules) >= e.maxRules {
		return cloud.FaultRule{}, cloud.NewError(cloud.CodeServerLimitExceeded,
			"fault rule: the server holds at most %s; delete some (DELETE /v1/faults/{id} or /v1/faults) first", plural.Of(e.maxRules, "rule", "rules"))
	}
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
	if r.Health != "" && r.Operation == "" {
		r.Operation = cloud.OperationAny
	}
	if r.Probability == nil {
		one := 1.0
		r.Probability = &one
	}
	seed := uint64(r.Seed)
	e.nextSeq++
	ru := &rule{spec: r, seq: e.nextSeq, firedBy: map[cloud.Operation]int{}, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	if r.TTLSeconds > 0 {
		ru.expires = e.now().Add(time.Duration(r.TTLSeconds) * time.Second)
	}
	e.rules = append(e.rules, ru)
	if r.Health == "" {
		// A health rule fires on no call (Health reads it), so Evaluate never sees it.
		e.byOp[r.Operation] = append(e.byOp[r.Operation], ru)
	}
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

// Reset replaces every rule by the given ones (the seeded rules) with fresh counters, and
// forgets the health set with SetVolumeHealth and SetInstanceHealth. Seeded
// rules may carry their own IDs, which must be unique; the others get "fault-N" IDs numbered
// from 1 again (skipping the seeded IDs), the same after every reset. More seeded rules than
// MaxRules is InvalidArgument.
func (e *Engine) Reset(seeded []cloud.FaultRule) error {
	var errs []error
	if len(seeded) > e.maxRules {
		errs = append(errs, fmt.Errorf("%d rules, at most %d allowed", len(seeded), e.maxRules))
	}
	ids := map[string]bool{}
	for i, r := range seeded {
		if err := Validate(r); err != nil {
			errs = append(errs, fmt.Errorf("faults[%d]: %w", i, err))
		}
		if r.ID != "" && ids[r.ID] {
			errs = append(errs, fmt.Errorf("faults[%d]: duplicate id %s", i, cloud.Quote(r.ID)))
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
	e.rules, e.byOp, e.nextID = nil, map[cloud.Operation][]*rule{}, 0
	// Health set by hand is test configuration too: a reset brings back a healthy cloud.
	e.volHealth, e.instHealth = nil, nil
	for _, r := range seeded {
		e.addLocked(r, ids)
	}
	return nil
}

// indexLocked returns the position of the rule with that ID, or -1.
func (e *Engine) indexLocked(id string) int {
	return slices.IndexFunc(e.rules, func(r *rule) bool { return r.spec.ID == id })
}

// List returns every live rule in creation order; expired rules are dropped. At most
// MaxRules.
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

// Page returns one page of the live rules in creation order (package paging: maxResults 0
// is paging.DefaultSize, at most paging.MaxSize) after pageToken, with the token of the next
// page when more rules follow. Errors: InvalidArgument (negative maxResults, malformed
// token). A token stays valid when its rule is deleted: it names a place in creation order.
func (e *Engine) Page(maxResults int, pageToken string) (cloud.FaultList, error) {
	size, err := paging.Size(maxResults)
	if err != nil {
		return cloud.FaultList{}, err
	}
	var after uint64
	if pageToken != "" {
		key, err := paging.Parse(pageToken, func(k string) bool { return paging.HexKey(k, "rule-", 16) })
		if err != nil {
			return cloud.FaultList{}, err
		}
		after, _ = strconv.ParseUint(strings.TrimPrefix(key, "rule-"), 16, 64)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expireLocked()
	out := cloud.FaultList{Faults: []cloud.FaultRule{}}
	// Rules are in seq order, so the page starts at the first seq after the token's.
	i, _ := slices.BinarySearchFunc(e.rules, after+1, func(r *rule, seq uint64) int { return cmp.Compare(r.seq, seq) })
	for ; i < len(e.rules); i++ {
		if len(out.Faults) == size {
			out.NextPageToken = paging.Token(fmt.Sprintf("rule-%016x", e.rules[i-1].seq))
			break
		}
		out.Faults = append(out.Faults, e.rules[i].view())
	}
	return out, nil
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

// Get returns one live rule with its Fired count; FaultNotFound if there is none with that ID
// (an expired rule is gone, as in List).
func (e *Engine) Get(id string) (cloud.FaultRule, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expireLocked()
	i := e.indexLocked(id)
	if i < 0 {
		return cloud.FaultRule{}, cloud.NewError(cloud.CodeFaultNotFound, "fault rule %s not found", cloud.Quote(id))
	}
	return e.rules[i].view(), nil
}

// Delete removes one rule; FaultNotFound if there is none with that ID.
func (e *Engine) Delete(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := e.indexLocked(id)
	if i < 0 {
		return cloud.NewError(cloud.CodeFaultNotFound, "fault rule %s not found", cloud.Quote(id))
	}
	e.removeLocked(func(r *rule) bool { return r.spec.ID == id })
	return nil
}

// Clear removes every rule, seeded or not, until the next Reset.
func (e *Engine) Clear() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules, e.byOp = nil, map[cloud.Operation][]*rule{}
}

func (r *rule) expired(now time.Time) bool { return !r.expires.IsZero() && !now.Before(r.expires) }

func (e *Engine) expireLocked() {
	now := e.now()
	e.removeLocked(func(r *rule) bool { return r.expired(now) })
}

// removeLocked drops the rules gone reports true for, from the list and the index.
func (e *Engine) removeLocked(gone func(*rule) bool) {
	e.rules = slices.DeleteFunc(e.rules, gone)
	for op, rs := range e.byOp {
		if rs = slices.DeleteFunc(rs, gone); len(rs) == 0 {
			delete(e.byOp, op)
		} else {
			e.byOp[op] = rs
		}
	}
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

// Evaluate runs the rules that can match one call (those of its operation and those of
// "*"), in creation order. A matching rule counts the call; it fires unless it is still
// within AfterCount, has fired Count times, or loses its probability draw. Every fired rule
// adds its latency; the first fired rule with an error decides the error and stops the
// evaluation. When the fired latency adds up to more than MaxLatency, Delay is MaxLatency
// and Err is Unavailable (Capped). The cost is linear in the rules of the call's operation
// and of "*", not in all rules.
func (e *Engine) Evaluate(c Call) Outcome {
	return e.evaluate(c, false)
}

// TransitionOutcome is what the transition rules decided for a transition that starts:
// Duration (when HasDuration) replaces the usual one, Stuck holds it while StuckRule lives,
// Fail ends it in error (FailRule named the code).
type TransitionOutcome struct {
	Fired       []Fired
	HasDuration bool
	Duration    time.Duration
	Stuck       bool
	StuckRule   string
	Fail        cloud.Code
	FailRule    string
}

// EvaluateTransition runs the transition rules (cloud.FaultRule.Transition) that match a call
// which starts a transition, counting them like Evaluate does: the first fired rule of each
// kind decides it (a slow or fail rule's duration, a stick, a fail's code).
func (e *Engine) EvaluateTransition(c Call) TransitionOutcome {
	out := e.evaluate(c, true)
	var to TransitionOutcome
	to.Fired = out.Fired
	for _, f := range out.Fired {
		r := f.rule
		switch {
		case r.Transition == cloud.TransitionStick && !to.Stuck:
			to.Stuck, to.StuckRule = true, r.ID
		case r.Transition == cloud.TransitionFail && to.Fail == "":
			to.Fail, to.FailRule = cmp.Or(r.Error, cloud.CodeInternalError), r.ID
		}
		if r.DurationMS > 0 && !to.HasDuration {
			to.HasDuration, to.Duration = true, time.Duration(r.DurationMS)*time.Millisecond
		}
	}
	return to
}

// Live reports whether rule id is live and, when it has a TTL, when it expires (zero: it
// does not), the store's view of a rule that holds a transition (store.RuleState).
func (e *Engine) Live(id string) (bool, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := e.indexLocked(id)
	if i < 0 || e.rules[i].expired(e.now()) {
		return false, time.Time{}
	}
	return true, e.rules[i].expires
}

func (e *Engine) evaluate(c Call, transitions bool) Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	var (
		out     Outcome
		expired bool
	)
	ops, star := e.byOp[c.Operation], e.byOp[cloud.OperationAny]
	if c.Operation == cloud.OperationAny {
		ops = nil // a call is never "*"; no rule is looked at twice
	}
	for len(ops) > 0 || len(star) > 0 {
		// Merge the two creation-ordered lists.
		var r *rule
		if len(star) == 0 || (len(ops) > 0 && ops[0].seq < star[0].seq) {
			r, ops = ops[0], ops[1:]
		} else {
			r, star = star[0], star[1:]
		}
		if r.expired(now) {
			expired = true
			continue
		}
		if (r.spec.Transition != "") != transitions || !r.matches(c) {
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
		out.Fired = append(out.Fired, Fired{RuleID: r.spec.ID, Operation: c.Operation, Error: r.spec.Error, Latency: latency, rule: r.spec})
		if transitions {
			continue // every kind may fire once; EvaluateTransition sorts them out
		}
		if r.spec.Error != "" {
			out.Err = cloud.NewError(r.spec.Error, "injected by fault rule %s", cloud.Quote(r.spec.ID))
			break
		}
	}
	if expired {
		e.removeLocked(func(r *rule) bool { return r.expired(now) })
	}
	if out.Delay > MaxLatency {
		out.Err = cloud.NewError(cloud.CodeUnavailable, "injected latency of %d ms (fault rules %s) is over the cap of %d ms per request; waited the cap",
			out.Delay.Milliseconds(), firedIDs(out.Fired), MaxLatency.Milliseconds())
		out.Delay, out.Capped = MaxLatency, true
	}
	return out
}

// firedIDs lists the IDs of fired rules for a message, the first few only.
func firedIDs(fired []Fired) string {
	const shown = 5
	ids := make([]string, 0, min(len(fired), shown))
	for _, f := range fired[:min(len(fired), shown)] {
		ids = append(ids, cloud.Quote(f.RuleID))
	}
	if len(fired) > shown {
		ids = append(ids, fmt.Sprintf("and %d more", len(fired)-shown))
	}
	return strings.Join(ids, ", ")
}
