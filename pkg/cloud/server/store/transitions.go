package store

import (
	"fmt"
	"slices"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Pending is one transition under way.
type Pending struct {
	VolumeID string
	Due      time.Time
	// Rule, when Stuck, is the fault rule that holds the transition past Due.
	Stuck bool
	Rule  string
}

// RuleState tells the store whether a fault rule is live and, when it expires by itself,
// when (zero: it does not).
type RuleState func(ruleID string) (live bool, expires time.Time)

// maxCompletionsPerCommit bounds one CompleteDue commit; the rest go in the next ones.
const maxCompletionsPerCommit = 256

// CompleteDue completes every transition whose time has come (due, and not held by a live
// rule), at most maxCompletionsPerCommit per commit, and returns how many it completed and
// when the next one is due (zero: none is, until a new transition starts or a rule holding
// one goes away without expiring).
func (s *Store) CompleteDue(rules RuleState) (int, time.Time, error) {
	total := 0
	for {
		pending, err := s.Pending()
		if err != nil {
			return total, time.Time{}, err
		}
		now := s.now()
		var due []string
		var next time.Time
		for _, p := range pending {
			at := p.Due
			if p.Stuck && rules != nil {
				live, expires := rules(p.Rule)
				if live && expires.IsZero() {
					continue
				}
				if live && expires.After(at) {
					at = expires
				}
			}
			if !at.After(now) && len(due) < maxCompletionsPerCommit {
				due = append(due, p.VolumeID)
				continue
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		if len(due) == 0 {
			return total, next, nil
		}
		n, err := s.completeVolumes(due, now, rules)
		total += n
		if err != nil {
			return total, time.Time{}, err
		}
		if len(due) < maxCompletionsPerCommit {
			return total, next, nil
		}
	}
}

// completeVolumes completes the transitions of ids that are still due at now, in one
// commit, checking each again inside the transaction (a request may have changed it since
// Pending read it).
func (s *Store) completeVolumes(ids []string, now time.Time, rules RuleState) (int, error) {
	return s.updateCount("complete transitions", func(t *txn) (int, error) {
		n := 0
		for _, id := range ids {
			if t.tx.Bucket(bucketPending).Get([]byte(id)) == nil {
				continue
			}
			v, err := t.getVolume(id)
			if err != nil {
				return 0, err
			}
			if !v.phase.State.Transient() || v.phase.Due.After(now) {
				continue
			}
			if v.phase.Stuck && rules != nil {
				if live, expires := rules(v.phase.Rule); live && (expires.IsZero() || expires.After(now)) {
					continue
				}
			}
			iv, err := t.loadInstance(v.state.attachedTo)
			if err != nil {
				return 0, fmt.Errorf("volume %s %s on %s: %w", id, v.phase.State, v.state.attachedTo, err)
			}
			if err := t.complete(v, iv); err != nil {
				return 0, err
			}
			n++
		}
		return n, nil
	})
}

// updateCount runs count in one update and returns what it counted, or its error wrapped
// with what. A batched update may run count more than once: only the last run's count is
// kept, so count starts from zero each time.
func (s *Store) updateCount(what string, count func(t *txn) (int, error)) (int, error) {
	var n int
	err := s.update(func(t *txn) error {
		var err error
		n, err = count(t)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}

// Pending lists the transitions under way, in volume ID order.
func (s *Store) Pending() ([]Pending, error) {
	var out []Pending
	err := s.view(func(t *txn) error {
		return t.tx.Bucket(bucketPending).ForEach(func(k, v []byte) error {
			p, err := decodePending(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list pending transitions: %w", err)
	}
	return out, nil
}

// ReleaseStuck lets every transition held by a fault rule complete: fault rules live in
// memory, so after a restart the rule that held one is gone (and its ID may name another
// rule). Each released transition completes at its own due time, or at once when that has
// passed, and is recorded as a TransitionReleased event. It returns how many it released.
func (s *Store) ReleaseStuck(reason string) (int, error) {
	pending, err := s.Pending()
	if err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(pending, func(p Pending) bool { return p.Stuck }) {
		return 0, nil // nothing to release: no commit (and no fsync) at every start
	}
	return s.updateCount("release stuck transitions", func(t *txn) (int, error) {
		n := 0
		var ids []string
		if err := t.tx.Bucket(bucketPending).ForEach(func(k, _ []byte) error {
			ids = append(ids, string(k))
			return nil
		}); err != nil {
			return 0, err
		}
		for _, id := range ids {
			vs, err := t.getVolumeState(id)
			if err != nil {
				return 0, err
			}
			p, err := t.getPhase(id, vs)
			if err != nil {
				return 0, err
			}
			if !p.Stuck {
				continue
			}
			if _, err := t.bump(); err != nil {
				return 0, err
			}
			rule := p.Rule
			p.Stuck, p.Rule = false, ""
			if err := t.putPhase(id, p); err != nil {
				return 0, err
			}
			if err := t.event(cloud.Event{Type: "TransitionReleased", VolumeID: id, InstanceID: vs.attachedTo,
				Detail: fmt.Sprintf("%s held by rule=%s: %s", p.State, rule, reason)}); err != nil {
				return 0, err
			}
			n++
		}
		return n, nil
	})
}
