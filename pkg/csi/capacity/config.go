package capacity

import (
	"errors"
	"fmt"
	"time"
)

// QuotaShare says how much of the account's attachment-quota headroom one node may count on
// (docs/design.md, "Capacity model"; flag --quota-share).
type QuotaShare string

const (
	// QuotaShareNone does not split the headroom: every node may use all of it. Nodes can
	// then together promise more than the quota holds; the attach stays the authority.
	QuotaShareNone QuotaShare = "none"
	// QuotaShareEven gives each node ⌈headroom / instances⌉.
	QuotaShareEven QuotaShare = "even"
)

// Defaults of Config, used by DefaultConfig.
const (
	DefaultStaleAfter         = 5 * time.Minute
	DefaultMaxStep            = 2
	DefaultStabilityWindow    = 30 * time.Second
	DefaultMaxStabilityWindow = 4 * time.Minute
	DefaultMinInterval        = 5 * time.Second
	DefaultJitter             = 0.2
	DefaultAnswerBound        = 2 * time.Second
	DefaultLookupTimeout      = 10 * time.Second
	// DefaultIncreaseSpread is 0: increases wait only for the stability window, as
	// before the option existed. bench/policy -fleet measures what a spread buys a large
	// fleet (docs/fleet-scale.md).
	DefaultIncreaseSpread = 0
)

// Config is the capacity policy and reporter configuration. Every field has a flag in the
// driver's options (the lead wires them); DefaultConfig gives the documented defaults.
type Config struct {
	// StaleAfter is how long the last known good value is reported after the cloud stops
	// answering (flag --capacity-stale-after, default 5m); afterwards the conservative floor
	// max(1, attached here) is reported. Must be > 0.
	StaleAfter time.Duration
	// MaxStep is the largest increase, in slots, applied per refresh (one accepted cloud
	// reading) once an increase has held for StabilityWindow (flag --capacity-max-step,
	// default 2). 0 means no step limit. Decreases are never limited. Must be ≥ 0.
	MaxStep int64
	// StabilityWindow is how long a higher value must be seen in every accepted reading
	// before the first increase is reported; it is the hysteresis against ±1 flapping
	// (default 30s). Failed lookups in between do not restart it; a lower reading, a
	// capacity error, the floor, or no accepted reading for longer than the window (at least
	// two lookup intervals) does. 0 means increases need no hold. Must be ≥ 0.
	StabilityWindow time.Duration
	// MaxStabilityWindow is how far the stability window grows when increases keep being
	// undone (flap damping): each decrease within MaxStabilityWindow of an increase doubles
	// the window, up to this; every 3·MaxStabilityWindow without such a flap halves it again
	// (default 4m). Equal to StabilityWindow: no damping. Must be ≥ StabilityWindow.
	MaxStabilityWindow time.Duration
	// MinInterval is the minimum time between two cloud lookups (flag
	// --capacity-min-interval, default 5s); answers in between come from the cache. Must be
	// > 0.
	MinInterval time.Duration
	// Jitter is the fraction of MinInterval added at random to each interval, in [0, 1]
	// (default 0.2: the next lookup is due 5s–6s after the last one), so that nodes do not
	// look up in lock step.
	Jitter float64
	// QuotaShare is QuotaShareNone or QuotaShareEven (flag --quota-share, default none).
	QuotaShare QuotaShare
	// AnswerBound is the longest MaxVolumesPerNode waits for a cloud lookup before it answers
	// with the current policy value (default 2s). Must be > 0.
	AnswerBound time.Duration
	// LookupTimeout bounds one cloud lookup, which continues in the background after
	// AnswerBound (default 10s). Must be ≥ AnswerBound.
	LookupTimeout time.Duration
	// IncreaseSpread staggers increases across the fleet (flag --capacity-increase-spread,
	// default 0: off). Each node holds an increase for StabilityWindow plus its own share
	// of IncreaseSpread, a fixed fraction in [0, 1) derived from its node ID, so that a
	// change every node sees at once (an account quota raised, with --quota-share=even)
	// reaches the kubelets' CSINode writes over StabilityWindow + IncreaseSpread instead
	// of within one kubelet period. Decreases are never delayed. Must be ≥ 0.
	IncreaseSpread time.Duration
	// StatePath is the file the last reported value and revision are kept in, normally
	// "<--state-dir>/capacity.json". Empty: nothing persists.
	StatePath string
}

// DefaultConfig returns the documented defaults with no StatePath.
func DefaultConfig() Config {
	return Config{
		StaleAfter:         DefaultStaleAfter,
		MaxStep:            DefaultMaxStep,
		StabilityWindow:    DefaultStabilityWindow,
		MaxStabilityWindow: DefaultMaxStabilityWindow,
		MinInterval:        DefaultMinInterval,
		Jitter:             DefaultJitter,
		QuotaShare:         QuotaShareNone,
		AnswerBound:        DefaultAnswerBound,
		LookupTimeout:      DefaultLookupTimeout,
		IncreaseSpread:     DefaultIncreaseSpread,
	}
}

// Validate reports every problem of c at once (errors.Join); nil when c is usable. Messages
// name the settings "capacity stale-after", "capacity max-step", ...
func (c Config) Validate() error {
	return errors.Join(c.Problems(func(setting string) string {
		if setting == "quota-share" {
			return setting
		}
		return "capacity " + setting
	})...)
}

// Problems lists every problem of c, one error each, naming a setting with name(setting),
// where setting is the flag-style name of a field: "stale-after", "max-step",
// "stability-window", "max-stability-window", "min-interval", "jitter", "quota-share",
// "answer-bound", "lookup-timeout" or "increase-spread". The driver's options pass a name
// that gives the flag
// (e.g. "--capacity-max-step"), so that one set of rules serves both.
func (c Config) Problems(name func(setting string) string) []error {
	var errs []error
	if c.StaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("%s must be > 0, got %s", name("stale-after"), c.StaleAfter))
	}
	if c.MaxStep < 0 {
		errs = append(errs, fmt.Errorf("%s must be >= 0 (0: no limit), got %d", name("max-step"), c.MaxStep))
	}
	if c.StabilityWindow < 0 {
		errs = append(errs, fmt.Errorf("%s must be >= 0, got %s", name("stability-window"), c.StabilityWindow))
	}
	if c.MaxStabilityWindow < c.StabilityWindow {
		errs = append(errs, fmt.Errorf("%s (%s) must be >= %s (%s)",
			name("max-stability-window"), c.MaxStabilityWindow, name("stability-window"), c.StabilityWindow))
	}
	if c.MinInterval <= 0 {
		errs = append(errs, fmt.Errorf("%s must be > 0, got %s", name("min-interval"), c.MinInterval))
	}
	if c.Jitter < 0 || c.Jitter > 1 || c.Jitter != c.Jitter {
		errs = append(errs, fmt.Errorf("%s must be in [0, 1], got %v", name("jitter"), c.Jitter))
	}
	switch c.QuotaShare {
	case QuotaShareNone, QuotaShareEven:
	default:
		errs = append(errs, fmt.Errorf("%s must be %s or %s, got %q", name("quota-share"), QuotaShareNone, QuotaShareEven, c.QuotaShare))
	}
	if c.AnswerBound <= 0 {
		errs = append(errs, fmt.Errorf("%s must be > 0, got %s", name("answer-bound"), c.AnswerBound))
	}
	if c.LookupTimeout < c.AnswerBound {
		errs = append(errs, fmt.Errorf("%s (%s) must be >= %s (%s)", name("lookup-timeout"), c.LookupTimeout, name("answer-bound"), c.AnswerBound))
	}
	if c.IncreaseSpread < 0 {
		errs = append(errs, fmt.Errorf("%s must be >= 0 (0: off), got %s", name("increase-spread"), c.IncreaseSpread))
	}
	if c.StaleAfter > 0 && c.MinInterval > 0 && c.StaleAfter < c.MinInterval {
		errs = append(errs, fmt.Errorf("%s (%s) must be >= %s (%s), or every cached value is already stale",
			name("stale-after"), c.StaleAfter, name("min-interval"), c.MinInterval))
	}
	return errs
}

// ParseQuotaShare parses the --quota-share flag value.
func ParseQuotaShare(s string) (QuotaShare, error) {
	switch q := QuotaShare(s); q {
	case QuotaShareNone, QuotaShareEven:
		return q, nil
	default:
		return "", fmt.Errorf("quota-share must be %q or %q, got %q", QuotaShareNone, QuotaShareEven, s)
	}
}
