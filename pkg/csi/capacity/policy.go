package capacity

import (
	"fmt"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Mode says where the reported value comes from.
type Mode string

// The policy modes, also the "mode" label of the mode metric.
const (
	// ModeFresh: the last lookup succeeded and the reported value equals its target.
	ModeFresh Mode = "fresh"
	// ModeLastKnownGood: the truth is unknown (lookup failing, or restored from disk and not
	// yet confirmed) and the last good value is younger than StaleAfter.
	ModeLastKnownGood Mode = "last-known-good"
	// ModeFloor: no good reading younger than StaleAfter, or the cloud said "full": the
	// conservative floor max(1, attached here) is reported.
	ModeFloor Mode = "floor"
	// ModeRamping: the last lookup succeeded with a higher target than reported; the value
	// is held for the stability window and then raised by at most MaxStep per refresh.
	ModeRamping Mode = "ramping"
)

// AllModes lists every Mode, in a stable order.
func AllModes() []Mode { return []Mode{ModeFresh, ModeLastKnownGood, ModeFloor, ModeRamping} }

// Raw computes raw = min(attachLimit − outOfBandSlots, attached + quotaShare) for one reading
// (docs/design.md, "Capacity model"); it may be ≤ 0. Instances ≤ 0 counts as 1.
func Raw(c cloud.Capacity, share QuotaShare) int64 {
	slots := int64(c.Slots())
	headroom := max(c.QuotaHeadroom, 0)
	quota := headroom
	if share == QuotaShareEven {
		n := int64(max(c.Instances, 1))
		quota = (headroom + n - 1) / n
	}
	return min(slots, int64(c.Attached)+quota)
}

// Reportable clamps a raw value to what may be reported: never 0 (unlimited in CSI), never
// negative.
func Reportable(raw int64) int64 { return max(1, raw) }

// PersistedState is what survives a restart of the node plugin (written under --state-dir):
// the last reported value, the newest cloud revision used and the cloud epoch it belongs to,
// the attached count of the last good reading (for the floor when the node cannot count)
// and when that reading arrived.
type PersistedState struct {
	// Version is the file format version, 1. Epoch was added without a version change: a
	// file without it has an unknown epoch, which compares as the same as any other.
	Version    int    `json:"version"`
	InstanceID string `json:"instanceId"`
	Reported   int64  `json:"reported"`
	Revision   uint64 `json:"revision"`
	// Epoch is the cloud.Capacity.Epoch of Revision; empty when the cloud gave none.
	Epoch    string    `json:"epoch,omitempty"`
	Attached int64     `json:"attached"`
	GoodAt   time.Time `json:"goodAt"`
}

// Snapshot is the policy's answer at one instant.
type Snapshot struct {
	Value int64
	Mode  Mode
}

// Policy is the capacity state machine. It does no I/O and reads no clock: every method
// takes the current time. It is not safe for concurrent use; Reporter serialises it.
type Policy struct {
	cfg Config

	known    bool   // reported was set by a reading or restored state
	reported int64  // the value reported now, ≥ 1
	revision uint64 // newest cloud revision a reported value was computed from
	epoch    string // the cloud epoch revision belongs to; "" when unknown

	hasGood  bool
	goodAt   time.Time // local time the last accepted reading arrived
	attached int64     // attached here in the last accepted reading
	// here is the node's own current count of this driver's volumes (ObserveAttachedHere),
	// -1 when unknown; the floor prefers it to attached, which ages with the reading.
	here    int64
	reading *cloud.Capacity
	raw     int64
	target  int64 // Reportable(raw) of the last accepted reading

	rising    bool // every accepted reading since riseSince had a target above reported
	riseSince time.Time
	riseLow   int64 // lowest target since riseSince
	lastRaise time.Time
	// spread is this node's share of IncreaseSpread, added to the hold of an increase's
	// first step (SpreadIncreases).
	spread   time.Duration
	damping  int       // the stability window is StabilityWindow·2^damping, at most MaxStabilityWindow
	lastFlap time.Time // last increase undone within the window, or last damping decay
	unknown  bool      // the last lookup failed, or no lookup since restore
	floored  bool      // a capacity error put the value at the floor
	// impaired is set while the last accepted reading said the instance is impaired or
	// stopped (cloud.Capacity.Health); beforeImpaired is the value reported when it began,
	// restored (up to the fresh target) when health returns.
	impaired       bool
	beforeImpaired int64
	lastErr        ErrorClass
	lastErrAt      time.Time
	lastChange     time.Time
	reason         string // why reported last changed (Reason)
}

// NewPolicy returns a policy with no knowledge: it reports 1 (mode floor) until the first
// reading or Restore. cfg should have passed Validate.
func NewPolicy(cfg Config) *Policy {
	return &Policy{cfg: cfg, reported: 1, here: -1}
}

// SpreadIncreases sets this node's share of Config.IncreaseSpread from frac, a fraction in
// [0, 1) that is fixed per node (the Reporter derives it from the node ID): every increase
// then holds for the stability window plus frac·IncreaseSpread before its first step, so
// that nodes which see the same higher value at once raise it at different times. A frac
// outside [0, 1) counts as 0.
func (p *Policy) SpreadIncreases(frac float64) {
	if !(frac >= 0 && frac < 1) {
		frac = 0
	}
	p.spread = time.Duration(frac * float64(p.cfg.IncreaseSpread))
}

// ObserveAttachedHere feeds the node's own current count of this driver's volumes in use on
// it (the volumes staged there now), or a negative n when the node cannot tell. The floor
// max(1, attached here) then follows that count instead of the attached count of the last
// good reading: during an outage pods end and free slots the scheduler would otherwise
// refill on the strength of an old count, while the limit may have fallen unseen. A count
// below the cloud's (attached, not yet staged) only holds new placements back, which is
// what the floor is for; the floor never raises the value either way.
func (p *Policy) ObserveAttachedHere(n int64) {
	p.here = max(n, -1)
}

// Restore makes s the starting point, as last known good with its age: a restarted or
// rolled-back plugin starts from its last trusted value and never accepts a reading older
// than s.Revision. It returns an error, and changes nothing, for an unusable s.
func (p *Policy) Restore(s PersistedState) error {
	if s.Version < 1 || s.Reported < 1 || s.Attached < 0 || s.GoodAt.IsZero() {
		return fmt.Errorf("restore capacity state: unusable state %+v", s)
	}
	p.known = true
	p.reported = s.Reported
	p.revision = s.Revision
	p.epoch = s.Epoch
	p.hasGood = true
	p.goodAt = s.GoodAt
	p.attached = s.Attached
	p.target = s.Reported
	p.unknown = true
	p.reason = ReasonRestored
	return nil
}

// State returns what should be persisted; ok is false before anything is known.
func (p *Policy) State() (s PersistedState, ok bool) {
	if !p.known || !p.hasGood {
		return PersistedState{}, false
	}
	return PersistedState{Version: 1, Reported: p.reported, Revision: p.revision, Epoch: p.epoch, Attached: p.attached, GoodAt: p.goodAt}, true
}

// ObserveReading feeds one successful lookup at time now. It returns ClassStaleRevision
// (and changes nothing) when c is older than a revision already used in the same cloud
// epoch, ClassInvalid for a reading with negative fields, else ClassNone. Revisions of
// different epochs (both non-empty) are not comparable: such a reading starts the revision
// guard afresh from its own revision (see NewEpoch); an empty epoch counts as the same.
// changed says whether the reported value changed.
func (p *Policy) ObserveReading(now time.Time, c cloud.Capacity) (class ErrorClass, changed bool) {
	if c.AttachLimit < 0 || c.OutOfBandSlots < 0 || c.Attached < 0 || c.QuotaHeadroom < 0 || c.Instances < 0 {
		return p.observeFailure(now, ClassInvalid)
	}
	if p.NewEpoch(c) {
		// The cloud's store started again (revisions restart from 0): the newest revision
		// of the old store says nothing about this one, and keeping it would ignore every
		// reading, pinning the node at its floor for good.
		p.revision = 0
	}
	if p.known && c.Revision < p.revision {
		// Not a failure of the cloud: a late answer. The newer reading already used stands.
		p.lastErr, p.lastErrAt = ClassStaleRevision, now
		return ClassStaleRevision, false
	}
	if p.rising && now.Sub(p.goodAt) > p.evidenceGap(now) {
		// Failed lookups do not restart the window, but a hold needs readings throughout
		// it: after a long silence the higher value has to hold again on its own.
		p.rising = false
	}
	before, reason := p.reported, ""
	p.accept(now, c)
	if !c.Health.Normal() {
		p.enterImpaired()
		return ClassNone, p.noteChange(now, before, ReasonImpaired)
	}
	if p.impaired {
		var settled bool
		if reason, settled = p.leaveImpaired(); settled {
			return ClassNone, p.noteChange(now, before, reason)
		}
	}
	if r := p.approachTarget(now); r != "" {
		reason = r
	}
	return ClassNone, p.noteChange(now, before, reason)
}

// accept records c, read at now and past the revision guard, as the newest good reading: its
// target, the volumes attached, its revision and epoch. The reported value is not touched.
func (p *Policy) accept(now time.Time, c cloud.Capacity) {
	raw := Raw(c, p.cfg.QuotaShare)
	cc := c
	p.reading, p.raw, p.target = &cc, raw, Reportable(raw)
	p.hasGood, p.goodAt, p.attached = true, now, int64(c.Attached)
	p.unknown, p.floored, p.lastErr = false, false, ClassNone
	p.revision = max(p.revision, c.Revision)
	if c.Epoch != "" {
		p.epoch = c.Epoch
	}
}

// enterImpaired reports the floor for an instance whose health is not normal, remembering on
// the first such reading the value to come back to (the reported one, or the target when
// nothing was known yet).
func (p *Policy) enterImpaired() {
	// The instance takes no attaches whatever its slots: the floor keeps new pods off it
	// (the scheduler counts volumes) instead of sending them to wait on refused
	// attaches; pods already placed retry (UNAVAILABLE), none is rejected.
	// docs/design.md, "Capacity model".
	if !p.impaired {
		p.impaired, p.beforeImpaired = true, p.reported
		if !p.known {
			p.beforeImpaired = p.target
		}
	}
	p.known, p.rising = true, false
	p.reported = min(p.reported, p.floor())
}

// leaveImpaired handles the first normal reading after an impairment. reason is
// ReasonHealthReturned when the value before the impairment was restored, else "". settled
// says the reported value has reached the target, so no ramp step follows.
func (p *Policy) leaveImpaired() (reason string, settled bool) {
	// Health is back. The slots never changed because of it, and the value before the
	// impairment was trusted: restore it, no higher than the fresh target, without the
	// stability window (which guards against readings, not against health). Anything
	// above it ramps as usual.
	p.impaired = false
	if restored := min(p.beforeImpaired, p.target); restored > p.reported {
		p.reported = restored
		reason = ReasonHealthReturned
	}
	if p.target <= p.reported {
		p.reported, p.rising = p.target, false
		return reason, true
	}
	return reason, false
}

// approachTarget moves the reported value toward the target of a normal reading taken at
// now: the first reading and decreases at once, increases one step once they held for the
// stability window. It returns why the value moved, or "" while a rise is still held back.
func (p *Policy) approachTarget(now time.Time) (reason string) {
	switch {
	case !p.known:
		// Nothing to protect yet: the first reading is the truth.
		p.known, p.reported, p.rising = true, p.target, false
		return ReasonFirstReading
	case p.target <= p.reported:
		// Decreases protect attaches: never delayed.
		if p.target < p.reported && !p.lastRaise.IsZero() && now.Sub(p.lastRaise) <= p.cfg.MaxStabilityWindow {
			p.flapped(now)
		}
		p.reported, p.rising = p.target, false
		return ReasonLowerReading
	}
	if !p.rising {
		p.rising, p.riseSince, p.riseLow = true, now, p.target
	}
	// The level that held through the window is the lowest target seen in it; raising
	// to a momentary peak would be undone by the next dip, one CSINode write each way.
	p.riseLow = min(p.riseLow, p.target)
	if now.Sub(p.riseSince) < p.window(now)+p.spread {
		return ""
	}
	step := p.riseLow - p.reported
	if p.cfg.MaxStep > 0 {
		step = min(step, p.cfg.MaxStep)
	}
	p.reported += step
	p.lastRaise = now
	if p.reported == p.target {
		p.rising = false
	} else if p.reported == p.riseLow {
		// What held is reached; anything higher has to hold on its own.
		p.riseSince, p.riseLow = now, p.target
	}
	return ReasonIncreaseHeld
}

// NewEpoch reports whether c comes from another cloud epoch than the revision already used:
// both epochs known and different.
func (p *Policy) NewEpoch(c cloud.Capacity) bool {
	return p.epoch != "" && c.Epoch != "" && c.Epoch != p.epoch
}

// ObserveError feeds one failed lookup of the given class at time now. Only ClassCapacity
// lowers the value (to the floor) and drops a pending increase; every other class leaves
// the value for Value to age. Such a failure says nothing against a pending increase, so it
// keeps its stability window running: nothing is raised until a later reading confirms the
// higher target, but a flaky cloud (say 30% of lookups failing) does not hold the count low
// forever by restarting the window at every failure. A silence longer than the window (see
// ObserveReading) or reaching the floor drops the increase. changed says whether the
// reported value changed.
func (p *Policy) ObserveError(now time.Time, class ErrorClass) (changed bool) {
	_, changed = p.observeFailure(now, class)
	return changed
}

func (p *Policy) observeFailure(now time.Time, class ErrorClass) (ErrorClass, bool) {
	before := p.reported
	p.unknown = true
	p.lastErr, p.lastErrAt = class, now
	if class.lowersCapacity() {
		// The cloud said full: evidence against the higher value.
		p.reported = min(p.reported, p.floor())
		p.floored, p.rising = true, false
	}
	return class, p.noteChange(now, before, ReasonCapacityError)
}

// Value returns the value to report at time now and its mode. When the last good reading
// is older than StaleAfter it lowers the value to the floor for good (so that recovery
// ramps from there); that is the only state it changes.
func (p *Policy) Value(now time.Time) Snapshot {
	s := p.Peek(now)
	if s.Mode == ModeFloor {
		// Recovery from the floor ramps from there after a fresh hold, as it always did.
		before, reason := p.reported, ReasonStale
		switch {
		case p.floored:
			reason = ReasonCapacityError
		case p.impaired:
			reason = ReasonImpaired
		}
		p.reported, p.rising = s.Value, false
		p.noteChange(now, before, reason)
	}
	return s
}

// Peek returns what Value would at time now without changing anything: for metrics before
// the node's live attached count is known, which a floor taken now would not see.
func (p *Policy) Peek(now time.Time) Snapshot {
	if !p.hasGood || p.age(now) > p.cfg.StaleAfter || p.floored || p.impaired {
		return Snapshot{Value: min(p.reported, p.floor()), Mode: ModeFloor}
	}
	switch {
	case p.unknown:
		return Snapshot{Value: p.reported, Mode: ModeLastKnownGood}
	case p.target > p.reported:
		return Snapshot{Value: p.reported, Mode: ModeRamping}
	default:
		return Snapshot{Value: p.reported, Mode: ModeFresh}
	}
}

// dampingDecay is how many MaxStabilityWindows without a flap halve the damped window. Tuned
// with bench/policy: 1 or 2 let ±1 noise through every few minutes (13% and 9% of the naive
// reporter's writes), 3 keeps it near 6% at no measurable cost in waiting pods.
const dampingDecay = 3

// window is the stability window in force at now. Each increase that a decrease undoes
// within MaxStabilityWindow doubles it, up to MaxStabilityWindow (flap damping: a value that
// keeps bouncing between two levels is reported at the lower one instead of as a stream of
// CSINode writes); every dampingDecay·MaxStabilityWindow without such a flap halves it again.
func (p *Policy) window(now time.Time) time.Duration {
	if p.damping > 0 && p.cfg.MaxStabilityWindow > 0 {
		if n := int(now.Sub(p.lastFlap) / (time.Duration(dampingDecay) * p.cfg.MaxStabilityWindow)); n > 0 {
			n = min(n, p.damping)
			p.damping -= n
			p.lastFlap = p.lastFlap.Add(time.Duration(n*dampingDecay) * p.cfg.MaxStabilityWindow)
		}
	}
	w := p.cfg.StabilityWindow
	for range p.damping {
		w *= 2
	}
	return min(w, max(p.cfg.MaxStabilityWindow, p.cfg.StabilityWindow))
}

// SettledIn is how long from now until flap damping no longer changes the policy's timing,
// if nothing flaps meanwhile: the damped window has decayed back to StabilityWindow, and
// the last increase is older than MaxStabilityWindow (before that, a decrease counts as a
// flap and doubles the window). 0 when both hold already, and always without damping
// (MaxStabilityWindow equal to StabilityWindow, or no window). Scenarios whose timings are
// documented for the configured window wait for 0 (fakecloud scenario).
func (p *Policy) SettledIn(now time.Time) time.Duration {
	if p.cfg.StabilityWindow <= 0 || p.cfg.MaxStabilityWindow <= p.cfg.StabilityWindow {
		return 0
	}
	var at time.Time
	p.window(now) // the decay due by now, which moves lastFlap on
	if p.damping > 0 {
		at = p.lastFlap.Add(time.Duration(p.damping*dampingDecay) * p.cfg.MaxStabilityWindow)
	}
	if !p.lastRaise.IsZero() {
		at = latest(at, p.lastRaise.Add(p.cfg.MaxStabilityWindow))
	}
	if at.IsZero() {
		return 0
	}
	return max(at.Sub(now), 0)
}

// evidenceGap is the longest time between two accepted readings that a pending increase
// survives: the stability window in force, but at least two lookup intervals (MinInterval
// plus jitter), so that a window shorter than the interval still lets a reading follow
// another. Failed lookups in between do not count against it; only the silence does. The
// damped window, not the configured one: readings are as sparse as the kubelet's calls when
// nothing fails, and a flapping truth ends the increase with its lower readings anyway.
func (p *Policy) evidenceGap(now time.Time) time.Duration {
	interval := p.cfg.MinInterval + time.Duration(p.cfg.Jitter*float64(p.cfg.MinInterval))
	return max(p.window(now), 2*interval)
}

func (p *Policy) flapped(now time.Time) {
	if p.window(now) < p.cfg.MaxStabilityWindow && p.cfg.StabilityWindow > 0 {
		p.damping++
	}
	p.lastFlap = now
}

// floor is the conservative value max(1, attached here), never above the current value;
// attached here is the node's live count when it has one, else the last good reading's.
func (p *Policy) floor() int64 {
	here := p.attached
	if p.here >= 0 {
		here = p.here
	}
	return min(p.reported, Reportable(here))
}

// age is how old the last good reading is at now; a clock that went back counts as 0.
func (p *Policy) age(now time.Time) time.Duration {
	return max(now.Sub(p.goodAt), 0)
}

func (p *Policy) noteChange(now time.Time, before int64, reason string) bool {
	if p.reported == before {
		return false
	}
	p.lastChange, p.reason = now, reason
	return true
}

// Why the reported value last changed, as Reason returns it (also the "reason" of the
// driver's "Capacity changed" log line).
const (
	ReasonFirstReading  = "first reading"
	ReasonLowerReading  = "cloud reading with a lower target (decreases apply at once)"
	ReasonIncreaseHeld  = "higher target held for the stability window (one ramp step)"
	ReasonCapacityError = "cloud refused for lack of capacity (floor: max(1, attached here))"
	ReasonStale         = "no good reading within stale-after (floor: max(1, attached here))"
	ReasonRestored      = "restored from the state file"
	// ReasonImpaired and ReasonHealthReturned follow the instance's health in the reading.
	ReasonImpaired       = "instance impaired or stopped: it takes no attaches (floor: max(1, attached here))"
	ReasonHealthReturned = "instance health returned (the value before the impairment, up to the reading's target)"
)

// Reason says why the reported value last changed, one of the Reason constants; "" while
// it has never changed.
func (p *Policy) Reason() string { return p.reason }
