package capacity

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Source reads the raw capacity of one instance from the cloud
// (GET /v1/instances/{id}/capacity); *cloud.Client satisfies it.
type Source interface {
	GetCapacity(ctx context.Context, instanceID string) (*cloud.Capacity, error)
}

// persistEvery bounds how often a reading that changes nothing but its time is written.
const persistEvery = 30 * time.Second

// lookupQuiet is how long lookups must go without a failure before a failing period is
// logged as over. A flaky cloud (some lookups failing, most not) then gives two lines at
// the default verbosity, one when it starts failing and one when it has stopped, instead
// of a pair every few seconds.
const lookupQuiet = time.Minute

// Reporter answers NodeGetInfo.max_volumes_per_node for one node. It implements the node
// service's CapacityReporter interface. Lookups are cached for MinInterval plus jitter and
// collapsed (singleflight); an answer never waits more than AnswerBound for the cloud. Safe
// for concurrent use.
type Reporter struct {
	cfg        Config
	src        Source
	instanceID string
	clk        clock.Clock
	m          *metrics
	sf         singleflight.Group

	persistMu   sync.Mutex // orders state reads and writes; taken before mu
	persisted   PersistedState
	restoreDone bool   // Restore has run
	stateNote   string // the outcome of Restore, DebugInfo.RestoredAtStart

	// attachedHere, if set, counts this driver's volumes in use on the node now (the live
	// floor); it is called without mu held, as it may do I/O. Set once by NewReporter.
	attachedHere AttachedHereFunc

	mu         sync.Mutex
	policy     *Policy
	rng        *rand.Rand
	nextLookup time.Time
	lastLookup time.Time
	lastErr    error
	last       Snapshot
	reported   bool // last is set
	// A failing period runs from the first failed lookup after a quiet one until
	// lookupQuiet has passed without a failure (logged at the default verbosity).
	failingSince time.Time // zero: not failing
	lastFailure  time.Time
	failures     int // failed lookups in the failing period
	lookupsSince int // all lookups in the failing period
	failClass    ErrorClass
	// loggedMode is the mode last logged at the default verbosity (see logMode).
	loggedMode Mode
}

// NewReporter returns a reporter for instanceID (the CSI node ID) reading from src. here
// counts this driver's volumes in use on the node now (the node plugin passes its
// staged-volume tracker's Count), so that the conservative floor max(1, attached here)
// follows detaches while the cloud cannot be read (Policy.ObserveAttachedHere); nil, or a
// count that fails, falls back to the attached count of the last good reading. here must be
// safe for concurrent use and must not call the reporter. clk nil
// means the real clock; reg nil means the metrics are not exported. It does no I/O: no
// goroutine is started, the cloud is not called and cfg.StatePath is not read; Restore reads
// it, once, before the first answer. Errors: an invalid cfg (all problems, errors.Join), a
// nil src, an empty instanceID, metrics that cannot be registered on reg.
func NewReporter(cfg Config, src Source, instanceID string, here AttachedHereFunc, clk clock.Clock, reg prometheus.Registerer) (*Reporter, error) {
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if src == nil {
		errs = append(errs, errors.New("capacity source is nil"))
	}
	if instanceID == "" {
		errs = append(errs, errors.New("capacity instance ID is empty"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new capacity reporter: %w", err)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(instanceID))
	seed := h.Sum64()
	r := &Reporter{
		cfg:          cfg,
		src:          src,
		instanceID:   instanceID,
		clk:          clk,
		attachedHere: here,
		policy:       NewPolicy(cfg),
		stateNote:    "nothing yet: Restore has not run",
		// Seeded by the node ID: deterministic in tests, yet nodes spread their lookups.
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	// The node's share of the increase spread, fixed for the node so that its increases
	// always wait alike: a fraction in [0, 1) from the top 53 bits of the hash, mixed first,
	// because FNV's high bits barely differ between IDs like node-1 and node-2 (200 such IDs
	// fell into 3 tenths of the range unmixed).
	r.policy.SpreadIncreases(float64(mix64(seed)>>11) / (1 << 53))
	r.m = newMetrics(r.goodAgeSeconds)
	if reg != nil {
		if err := register(reg, r.m.collectors()); err != nil {
			return nil, fmt.Errorf("new capacity reporter: %w", err)
		}
	}
	r.m.info.WithLabelValues(instanceID).Set(1)
	r.m.dynamic.Set(1)
	r.publishPeek()
	return r, nil
}

// publishPeek sets the mode and reported metrics to what MaxVolumesPerNode would answer
// before any lookup: the restored value as last known good (or the floor, if it is too old),
// else 1 at the floor. Peek, not Value: a floor taken now would use the restored attached
// count and stick, while the first lookup sees the node's live count.
func (r *Reporter) publishPeek() {
	r.mu.Lock()
	s := r.policy.Peek(r.clk.Now())
	r.mu.Unlock()
	r.m.setMode(s.Mode)
	r.m.reported.Set(float64(s.Value))
}

// Restore is the reporter's start-up step: when cfg.StatePath holds a state of this instance
// (written by an earlier run of the plugin, docs/design.md "Survives restarts"), the reporter
// starts from it as last known good. A missing, unreadable or foreign file is not an error:
// it is logged and shown in DebugState (RestoredAtStart), so that a bad file cannot keep the
// node plugin from registering. Driver.Run calls it once, after taking the state directory's
// lock and before serving, so that the first NodeGetInfo already answers the restored value.
// Only the first call reads the file, and only before the first lookup; later calls do
// nothing.
func (r *Reporter) Restore(ctx context.Context) {
	logger := klog.FromContext(ctx)
	r.persistMu.Lock()
	defer r.persistMu.Unlock()
	if r.restoreDone {
		return
	}
	r.restoreDone = true
	r.mu.Lock()
	looked := !r.lastLookup.IsZero()
	r.mu.Unlock()
	if looked {
		// A reading is newer than anything on disk.
		r.stateNote = "nothing: a lookup came first"
		return
	}
	if r.cfg.StatePath == "" {
		r.stateNote = "nothing: no state path"
		return
	}
	s, ok, err := loadState(r.cfg.StatePath)
	switch {
	case err != nil:
		r.stateNote = "nothing, ignored: " + err.Error()
		logger.Error(err, "Ignoring capacity state", "path", r.cfg.StatePath, "nodeID", r.instanceID)
		return
	case !ok:
		r.stateNote = "nothing: no state file"
		return
	case s.InstanceID != r.instanceID:
		r.stateNote = fmt.Sprintf("nothing, ignored: the state file is for instance %q", s.InstanceID)
		logger.Info("Ignoring capacity state of another instance", "path", r.cfg.StatePath, "stateInstanceID", s.InstanceID, "nodeID", r.instanceID)
		return
	}
	r.mu.Lock()
	err = r.policy.Restore(s)
	r.mu.Unlock()
	if err != nil {
		r.stateNote = "nothing, ignored: " + err.Error()
		logger.Error(err, "Ignoring capacity state", "path", r.cfg.StatePath, "nodeID", r.instanceID)
		return
	}
	r.persisted = s
	r.stateNote = "restored"
	r.publishPeek()
	logger.Info("Restored capacity state", "path", r.cfg.StatePath, "nodeID", r.instanceID, "reported", s.Reported, "revision", s.Revision, "epoch", s.Epoch, "goodAt", s.GoodAt)
}

// AttachedHereFunc counts the volumes of this driver in use on the node now, as the node
// itself knows them (the volumes staged there, including those staged before a restart of
// the plugin). An error means the count is unknown.
type AttachedHereFunc func() (int, error)

// observeHere asks the node for its count and feeds it to the policy; r.mu must not be held.
func (r *Reporter) observeHere(ctx context.Context) {
	f := r.attachedHere
	if f == nil {
		return
	}
	n, err := f()
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot count the volumes attached here, the floor uses the last reading's count", "nodeID", r.instanceID, "err", err)
		n = -1
	}
	r.mu.Lock()
	r.policy.ObserveAttachedHere(int64(n))
	r.mu.Unlock()
}

// MaxVolumesPerNode returns the value for NodeGetInfo.max_volumes_per_node (CSI spec
// v1.13.0, NodeGetInfo; KEP-4876), always ≥ 1. It looks the cloud up when the cache is older
// than MinInterval (plus jitter), sharing one lookup among concurrent callers, and waits for
// it at most AnswerBound or until ctx ends; then it answers with the current policy value.
// The error is always nil: a capacity problem must not fail NodeGetInfo (the kubelet would
// not register the plugin), it shows in the value's mode instead.
func (r *Reporter) MaxVolumesPerNode(ctx context.Context) (int64, error) {
	if r.due() {
		ch := r.sf.DoChan("lookup", func() (any, error) {
			r.lookup(context.WithoutCancel(ctx))
			return nil, nil
		})
		t := r.clk.NewTimer(r.cfg.AnswerBound)
		select {
		case <-ch:
		case <-t.C():
			klog.FromContext(ctx).V(2).Info("Capacity lookup slower than the answer bound, answering from the policy", "nodeID", r.instanceID, "bound", r.cfg.AnswerBound)
		case <-ctx.Done():
		}
		t.Stop()
	}
	return r.current(ctx).Value, nil
}

// CachedMaxVolumesPerNode is MaxVolumesPerNode when no cloud lookup is due, the answer of
// almost every kubelet call: the current policy value (logged and published as by
// MaxVolumesPerNode), with ok true, without I/O or waiting. When a lookup is due it does
// nothing and ok is false: MaxVolumesPerNode makes it.
func (r *Reporter) CachedMaxVolumesPerNode(ctx context.Context) (slots int64, ok bool) {
	if r.due() {
		return 0, false
	}
	return r.current(ctx).Value, true
}

// Refresh makes a lookup if one is due and waits for it (no answer bound), for a background
// refresher. It returns ctx.Err() if ctx ends first.
func (r *Reporter) Refresh(ctx context.Context) error {
	if !r.due() {
		return nil
	}
	ch := r.sf.DoChan("lookup", func() (any, error) {
		r.lookup(context.WithoutCancel(ctx))
		return nil, nil
	})
	select {
	case <-ch:
		r.current(ctx)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run refreshes in the background whenever a lookup is due, so that the value ages, ramps
// and recovers between kubelet calls, until ctx ends; it then waits for a lookup in flight
// (at most LookupTimeout) and returns nil.
func (r *Reporter) Run(ctx context.Context) error {
	// Lookups outlive the call that started them (they run under WithoutCancel, bounded by
	// LookupTimeout) and persist state when they finish; wait for the one in flight so that
	// nothing writes to the state dir after Run has returned. singleflight's Do on the same
	// key joins the lookup in flight, or runs the no-op when there is none.
	defer r.sf.Do("lookup", func() (any, error) { return nil, nil }) //nolint:errcheck // only waits; the lookup handled its own error
	for {
		if err := r.Refresh(ctx); err != nil {
			return nil
		}
		r.mu.Lock()
		wait := max(r.nextLookup.Sub(r.clk.Now()), 0)
		r.mu.Unlock()
		t := r.clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

func (r *Reporter) due() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.clk.Now().Before(r.nextLookup)
}

// lookup makes one cloud lookup, feeds the policy and persists the state. It runs inside
// the singleflight, so there is at most one at a time.
func (r *Reporter) lookup(ctx context.Context) {
	if !r.due() {
		// Another lookup finished between the caller's check and this one.
		return
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "nodeID", r.instanceID)
	lctx, cancel := context.WithTimeout(ctx, r.cfg.LookupTimeout)
	c, err := r.src.GetCapacity(lctx, r.instanceID)
	cancel()
	r.m.lookups.Inc()
	// A capacity error lowers the value to the floor right here: count first.
	r.observeHere(ctx)

	r.mu.Lock()
	now := r.clk.Now()
	r.lastLookup = now
	r.nextLookup = now.Add(r.interval())
	var class ErrorClass
	switch {
	case err != nil:
		class = Classify(err)
		var ce *cloud.Error
		if errors.As(err, &ce) && ce.RetryAfter > 0 {
			r.nextLookup = latest(r.nextLookup, now.Add(ce.RetryAfter))
		}
		r.policy.ObserveError(now, class)
	case c == nil:
		err, class = errors.New("cloud returned no capacity"), ClassInvalid
		r.policy.ObserveError(now, class)
	case c.InstanceID != "" && c.InstanceID != r.instanceID:
		err, class = fmt.Errorf("cloud returned the capacity of instance %q", c.InstanceID), ClassInvalid
		r.policy.ObserveError(now, class)
	default:
		if r.policy.NewEpoch(*c) {
			logger.Info("Cloud epoch changed, revisions start again", "oldEpoch", r.policy.epoch, "newEpoch", c.Epoch,
				"oldRevision", r.policy.revision, "revision", c.Revision)
		}
		class, _ = r.policy.ObserveReading(now, *c)
		if class != ClassNone {
			err = fmt.Errorf("reading of revision %d ignored: %s", c.Revision, class)
		} else {
			r.m.raw.Set(float64(r.policy.raw))
			r.m.setCloud(*c)
		}
	}
	r.lastErr = err
	failing, recovered := r.noteLookup(now, class)
	var mode Mode
	var reported int64
	if failing || recovered.failures > 0 {
		s := r.policy.Peek(now) // for the log line only; current() applies Value
		mode, reported = s.Mode, s.Value
	}
	r.mu.Unlock()

	if class != ClassNone {
		r.m.lookupErrors.WithLabelValues(string(class)).Inc()
		logger.V(2).Info("Capacity lookup failed", "class", class, "err", err)
	}
	switch {
	case failing && class.lowersCapacity():
		logger.Error(err, "Capacity lookups failing: the cloud says the node is full; reporting the floor",
			"class", class, "mode", mode, "reported", reported)
	case failing:
		logger.Error(err, "Capacity lookups failing; the reported value is held (last known good, then the floor after stale-after)",
			"class", class, "mode", mode, "reported", reported, "staleAfter", r.cfg.StaleAfter)
	}
	if recovered.failures > 0 {
		logger.Info("Capacity lookups recovered", "failedFor", recovered.failedFor, "failures", recovered.failures,
			"lookups", recovered.lookups, "lastClass", recovered.lastClass, "quietFor", lookupQuiet, "mode", mode, "reported", reported)
	}
	r.persist(logger)
}

// failingPeriod summarises a failing period that has ended.
type failingPeriod struct {
	failedFor time.Duration // from the first failure to the last
	failures  int
	lookups   int
	lastClass ErrorClass
}

// noteLookup feeds the outcome of one lookup at now to the failing-period tracker; r.mu must
// be held. failing is true for the first failure after a quiet period; recovered is set
// (failures > 0) when this successful lookup ends a period. A stale revision is a late
// answer, not a failure of the cloud, and neither starts nor ends a period.
func (r *Reporter) noteLookup(now time.Time, class ErrorClass) (failing bool, recovered failingPeriod) {
	if class == ClassStaleRevision {
		return false, failingPeriod{}
	}
	if !r.failingSince.IsZero() {
		r.lookupsSince++
	}
	if class != ClassNone {
		failing = r.failingSince.IsZero()
		if failing {
			r.failingSince, r.failures, r.lookupsSince = now, 0, 1
		}
		r.failures++
		r.lastFailure = now
		r.failClass = class
		return failing, failingPeriod{}
	}
	if r.failingSince.IsZero() || now.Sub(r.lastFailure) < lookupQuiet {
		return false, failingPeriod{}
	}
	recovered = failingPeriod{failedFor: r.lastFailure.Sub(r.failingSince), failures: r.failures, lookups: r.lookupsSince,
		lastClass: r.failClass}
	r.failingSince, r.failures, r.lookupsSince = time.Time{}, 0, 0
	return false, recovered
}

// interval is MinInterval plus a random share of Jitter·MinInterval; r.mu must be held.
func (r *Reporter) interval() time.Duration {
	return r.cfg.MinInterval + time.Duration(r.cfg.Jitter*r.rng.Float64()*float64(r.cfg.MinInterval))
}

func (r *Reporter) persist(logger klog.Logger) {
	if r.cfg.StatePath == "" {
		return
	}
	r.persistMu.Lock()
	defer r.persistMu.Unlock()
	r.mu.Lock()
	s, ok := r.policy.State()
	r.mu.Unlock()
	if !ok {
		return
	}
	s.InstanceID = r.instanceID
	old := r.persisted
	if s.Reported == old.Reported && s.Revision == old.Revision && s.Epoch == old.Epoch && s.Attached == old.Attached &&
		s.InstanceID == old.InstanceID && s.GoodAt.Sub(old.GoodAt) < persistEvery {
		return
	}
	if err := saveState(r.cfg.StatePath, s); err != nil {
		r.m.persistErrors.Inc()
		logger.Error(err, "Cannot persist capacity state", "path", r.cfg.StatePath)
		return
	}
	r.persisted = s
}

// current evaluates the policy now, publishes the result to the metrics and logs changes:
// every change of the reported value (each is a CSINode write) and the mode changes that
// logMode picks at the default verbosity, the others at V(2).
func (r *Reporter) current(ctx context.Context) Snapshot {
	r.observeHere(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.policy.Value(r.clk.Now())
	if r.reported && s == r.last {
		// Nothing to log or publish: the answer of almost every NodeGetInfo, which then
		// builds no logger.
		return s
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "nodeID", r.instanceID)
	switch {
	case !r.reported:
		logger.Info("Capacity reported", "value", s.Value, "mode", s.Mode, "reason", r.policy.Reason())
		r.loggedMode = s.Mode
	case s.Value != r.last.Value:
		r.m.changes.Inc()
		logger.Info("Capacity changed", "from", r.last.Value, "to", s.Value, "mode", s.Mode, "reason", r.policy.Reason(),
			"target", r.policy.target)
	}
	if r.reported && s.Mode != r.last.Mode {
		if r.logMode(s.Mode) {
			logger.Info("Capacity mode changed", "from", r.last.Mode, "to", s.Mode, "value", s.Value)
			r.loggedMode = s.Mode
		} else {
			logger.V(2).Info("Capacity mode changed", "from", r.last.Mode, "to", s.Mode, "value", s.Value)
		}
	}
	if !r.reported || s != r.last {
		r.m.reported.Set(float64(s.Value))
		r.m.setMode(s.Mode)
	}
	r.last, r.reported = s, true
	return s
}

// logMode says whether a change to mode is logged at the default verbosity; r.mu must be
// held. Fresh and ramping are one level (the cloud answers), then last-known-good, then the
// floor. A change of level is logged when it reaches or leaves the floor, or when no
// failing period is running: inside one, the flips between last-known-good and the cloud's
// value that every failed lookup of a flaky cloud causes are covered by the failing-period
// lines, and would otherwise be logged every few seconds.
func (r *Reporter) logMode(mode Mode) bool {
	level := func(m Mode) int {
		switch m {
		case ModeLastKnownGood:
			return 1
		case ModeFloor:
			return 2
		default:
			return 0
		}
	}
	if level(mode) == level(r.loggedMode) {
		return false
	}
	return mode == ModeFloor || r.loggedMode == ModeFloor || r.failingSince.IsZero()
}

func (r *Reporter) goodAgeSeconds() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.policy.hasGood {
		return -1
	}
	return r.policy.age(r.clk.Now()).Seconds()
}

// DebugInfo is the JSON-able state DebugState returns, for the driver's debug endpoint.
type DebugInfo struct {
	NodeID   string `json:"nodeId"`
	Mode     Mode   `json:"mode"`
	Reported int64  `json:"reported"`
	// Raw and Target (max(1, raw)) come from the last accepted reading, Inputs.
	Raw    *int64          `json:"raw,omitempty"`
	Target *int64          `json:"target,omitempty"`
	Inputs *cloud.Capacity `json:"inputs,omitempty"`
	// LastGoodAgeSeconds is the age of the last good reading (or restored state); -1: none.
	LastGoodAgeSeconds float64 `json:"lastGoodAgeSeconds"`
	Revision           uint64  `json:"revision"`
	// Epoch is the cloud epoch of Revision; empty when the cloud gave none.
	Epoch string `json:"epoch,omitempty"`
	// AttachedHere is the node's own last count of this driver's volumes, used by the
	// floor; absent when the node gave none (the floor then uses Inputs.attached).
	AttachedHere *int64     `json:"attachedHere,omitempty"`
	RisingSince  *time.Time `json:"risingSince,omitempty"`
	// StabilityWindow is the window in force now, longer than the configured one while
	// flap damping is on (Damping > 0).
	StabilityWindow string `json:"stabilityWindow"`
	Damping         int    `json:"damping"`
	// LastIncrease is the last raise of the reported value: a decrease within
	// config.maxStabilityWindow of it counts as a flap and doubles the stability window.
	LastIncrease *time.Time `json:"lastIncrease,omitempty"`
	// SettledInSeconds is how long until flap damping no longer changes the timing, if
	// nothing flaps meanwhile (Policy.SettledIn); absent when that holds already. A scenario
	// whose timings are written for the configured window waits for it (fakecloud scenario).
	SettledInSeconds float64 `json:"settledInSeconds,omitempty"`
	// IncreaseDelay is this node's share of Config.IncreaseSpread, added to the stability
	// window before an increase's first step; absent when the spread is off.
	IncreaseDelay string `json:"increaseDelay,omitempty"`
	// LastErrorClass and LastError describe the latest lookup (empty when it succeeded);
	// LastErrorAt is the latest failure, however old.
	LastErrorClass ErrorClass `json:"lastErrorClass,omitempty"`
	LastError      string     `json:"lastError,omitempty"`
	LastErrorAt    *time.Time `json:"lastErrorAt,omitempty"`
	LastChange     *time.Time `json:"lastChange,omitempty"`
	LastLookup     *time.Time `json:"lastLookup,omitempty"`
	NextLookup     *time.Time `json:"nextLookup,omitempty"`
	StatePath      string     `json:"statePath,omitempty"`
	// RestoredAtStart is the outcome of reading StatePath when the plugin started, not the
	// file now (which the plugin writes as it goes): "restored", or "nothing: no state
	// path", "nothing: no state file", "nothing, ignored: <why>"; "nothing yet: Restore has
	// not run" before Driver.Run's start-up step.
	RestoredAtStart string `json:"restoredAtStart"`
	Config          struct {
		StaleAfter         string     `json:"staleAfter"`
		MaxStep            int64      `json:"maxStep"`
		StabilityWindow    string     `json:"stabilityWindow"`
		MaxStabilityWindow string     `json:"maxStabilityWindow"`
		MinInterval        string     `json:"minInterval"`
		Jitter             float64    `json:"jitter"`
		QuotaShare         QuotaShare `json:"quotaShare"`
		IncreaseSpread     string     `json:"increaseSpread,omitempty"`
	} `json:"config"`
}

// DebugState returns a DebugInfo (as any, to match the node service's interface) describing
// the policy now. It does not call the cloud.
func (r *Reporter) DebugState() any {
	r.persistMu.Lock()
	note := r.stateNote
	r.persistMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clk.Now()
	p := r.policy
	s := p.Value(now)
	d := DebugInfo{
		NodeID:             r.instanceID,
		Mode:               s.Mode,
		Reported:           s.Value,
		LastGoodAgeSeconds: -1,
		Revision:           p.revision,
		Epoch:              p.epoch,
		LastErrorClass:     p.lastErr,
		StatePath:          r.cfg.StatePath,
		RestoredAtStart:    note,
	}
	if p.reading != nil {
		in, raw, target := *p.reading, p.raw, p.target
		d.Inputs, d.Raw, d.Target = &in, &raw, &target
	}
	if p.hasGood {
		d.LastGoodAgeSeconds = p.age(now).Seconds()
	}
	if p.here >= 0 {
		h := p.here
		d.AttachedHere = &h
	}
	if p.rising {
		t := p.riseSince
		d.RisingSince = &t
	}
	d.StabilityWindow, d.Damping = p.window(now).String(), p.damping
	if !p.lastRaise.IsZero() {
		t := p.lastRaise
		d.LastIncrease = &t
	}
	d.SettledInSeconds = p.SettledIn(now).Seconds()
	if r.cfg.IncreaseSpread > 0 {
		d.IncreaseDelay = p.spread.String()
		d.Config.IncreaseSpread = r.cfg.IncreaseSpread.String()
	}
	if r.lastErr != nil {
		d.LastError = r.lastErr.Error()
	}
	if !p.lastErrAt.IsZero() {
		t := p.lastErrAt
		d.LastErrorAt = &t
	}
	if !p.lastChange.IsZero() {
		t := p.lastChange
		d.LastChange = &t
	}
	if !r.lastLookup.IsZero() {
		a, b := r.lastLookup, r.nextLookup
		d.LastLookup, d.NextLookup = &a, &b
	}
	d.Config.StaleAfter = r.cfg.StaleAfter.String()
	d.Config.MaxStep = r.cfg.MaxStep
	d.Config.StabilityWindow = r.cfg.StabilityWindow.String()
	d.Config.MaxStabilityWindow = r.cfg.MaxStabilityWindow.String()
	d.Config.MinInterval = r.cfg.MinInterval.String()
	d.Config.Jitter = r.cfg.Jitter
	d.Config.QuotaShare = r.cfg.QuotaShare
	return d
}

// mix64 is the splitmix64 finalizer: every input bit affects every output bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
