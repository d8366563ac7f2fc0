package capacityplot

import (
	"slices"
	"time"
)

// CountChange is one change of the driver's allocatable.count in a node's
// CSINode as the watcher saw it. Old or New is nil when the CSINode, the
// driver entry or its allocatable is missing.
type CountChange struct {
	Node            string    `json:"node"`
	At              time.Time `json:"at"`
	ResourceVersion string    `json:"resourceVersion"`
	Old             *int64    `json:"old"`
	New             *int64    `json:"new"`
}

// Lag ties a CSINode count change to the cloud change it reflects.
type Lag struct {
	Change CountChange
	// Matched is false when no cloud change moved the truth to the new value
	// during the run: the driver's own policy (floor, ramp, last known good)
	// or a value the truth already had at the start.
	Matched bool
	// Cloud is the truth step the change reflects (when Matched).
	Cloud TruthStep
	// Lag is Change.At − Cloud.At.
	Lag time.Duration
	// Stale is true for a matched change when the truth had moved on again
	// before it landed: the write was out of date when it happened.
	Stale bool
}

// ComputeLags matches every change to a known count with the latest truth
// transition into that count at or before the change (steps of one node,
// oldest first, the first being the baseline). Changes are of one node.
func ComputeLags(steps []TruthStep, changes []CountChange) []Lag {
	out := make([]Lag, 0, len(changes))
	for _, c := range changes {
		l := Lag{Change: c}
		if c.New == nil {
			out = append(out, l)
			continue
		}
		v := *c.New
		last := -1
		for i, s := range steps {
			if s.At.After(c.At) {
				break
			}
			last = i
		}
		for k := last; k >= 1; k-- {
			if steps[k].Truth == v && steps[k-1].Truth != v {
				l.Matched, l.Cloud, l.Lag = true, steps[k], c.At.Sub(steps[k].At)
				l.Stale = steps[last].Truth != v
				break
			}
		}
		out = append(out, l)
	}
	return out
}

// NodeStats sums up one node's run.
type NodeStats struct {
	Node string
	// Writes counts every CSINode update (new resourceVersion), CountChanges
	// those that changed this driver's allocatable.count.
	Writes, CountChanges int
	// TruthChanges counts cloud changes of the node's truth; Missed those
	// that no CSINode change reflected.
	TruthChanges, Missed int
	// Matched, Unmatched and Stale split CountChanges (see Lag).
	Matched, Unmatched, Stale int
	// Lag statistics over the matched changes; zero when none.
	LagMin, LagMedian, LagP90, LagMax time.Duration
}

// Stats computes NodeStats from one node's truth steps, lags and writes.
func Stats(node string, steps []TruthStep, lags []Lag, writes int) NodeStats {
	st := NodeStats{Node: node, Writes: writes, CountChanges: len(lags)}
	if len(steps) > 0 {
		for i := 1; i < len(steps); i++ {
			if steps[i].Truth != steps[i-1].Truth {
				st.TruthChanges++
			}
		}
	}
	reflected := map[uint64]bool{}
	var ds []time.Duration
	for _, l := range lags {
		if l.Stale {
			st.Stale++
		}
		if !l.Matched {
			st.Unmatched++
			continue
		}
		st.Matched++
		reflected[l.Cloud.Revision] = true
		ds = append(ds, l.Lag)
	}
	st.Missed = st.TruthChanges - len(reflected)
	if len(ds) > 0 {
		slices.Sort(ds)
		st.LagMin, st.LagMax = ds[0], ds[len(ds)-1]
		st.LagMedian = percentile(ds, 50)
		st.LagP90 = percentile(ds, 90)
	}
	return st
}

// percentile is the nearest-rank percentile p (0..100] of sorted ds.
func percentile(ds []time.Duration, p int) time.Duration {
	rank := (p*len(ds) + 99) / 100
	return ds[max(rank, 1)-1]
}
