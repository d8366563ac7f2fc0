package capacityplot

import (
	"testing"
	"time"
)

func TestComputeLags(t *testing.T) {
	steps := []TruthStep{
		step(0, 1, "baseline", 7, 0),
		step(10, 2, "InstancePatched", 5, 0),
		step(12, 3, "VolumeAttached", 5, 1), // attached only: not a truth change
		step(20, 4, "QuotasChanged", 7, 1),
		step(30, 5, "InstancePatched", 4, 1),
		step(31, 6, "InstancePatched", 6, 1),
	}
	tests := []struct {
		name      string
		change    CountChange
		matched   bool
		rev       uint64
		lag       time.Duration
		stale     bool
		wantCause string
	}{
		{name: "follows a drop", change: CountChange{At: at(14), New: i64(5)}, matched: true, rev: 2, lag: 4 * time.Second, wantCause: "InstancePatched"},
		{name: "follows a rise", change: CountChange{At: at(25), New: i64(7)}, matched: true, rev: 4, lag: 5 * time.Second, wantCause: "QuotasChanged"},
		{name: "at the same instant", change: CountChange{At: at(10), New: i64(5)}, matched: true, rev: 2, lag: 0, wantCause: "InstancePatched"},
		{name: "stale: truth moved on", change: CountChange{At: at(33), New: i64(4)}, matched: true, rev: 5, lag: 3 * time.Second, stale: true, wantCause: "InstancePatched"},
		{name: "latest transition wins", change: CountChange{At: at(40), New: i64(6)}, matched: true, rev: 6, lag: 9 * time.Second, wantCause: "InstancePatched"},
		{name: "older transition when truth left the value", change: CountChange{At: at(40), New: i64(7)}, matched: true, rev: 4, lag: 20 * time.Second, stale: true, wantCause: "QuotasChanged"},
		{name: "floor value never the truth", change: CountChange{At: at(40), New: i64(1)}},
		{name: "baseline value before any change", change: CountChange{At: at(5), New: i64(7)}},
		{name: "before the cloud changes to it", change: CountChange{At: at(8), New: i64(5)}},
		{name: "count removed", change: CountChange{At: at(40)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ComputeLags(steps, []CountChange{tc.change})
			if len(got) != 1 {
				t.Fatalf("expected 1 lag, got %d", len(got))
			}
			l := got[0]
			if l.Matched != tc.matched || l.Stale != tc.stale {
				t.Fatalf("expected matched=%v stale=%v, got %+v", tc.matched, tc.stale, l)
			}
			if !tc.matched {
				return
			}
			if l.Cloud.Revision != tc.rev || l.Lag != tc.lag || l.Cloud.Cause != tc.wantCause {
				t.Errorf("expected rev %d (%s) lag %s, got rev %d (%s) lag %s", tc.rev, tc.wantCause, tc.lag, l.Cloud.Revision, l.Cloud.Cause, l.Lag)
			}
		})
	}
}

func TestStats(t *testing.T) {
	steps := []TruthStep{
		step(0, 1, "baseline", 7, 0),
		step(10, 2, "InstancePatched", 5, 0),
		step(20, 3, "InstancePatched", 6, 0), // flaps back before anyone saw it
		step(21, 4, "InstancePatched", 5, 0),
		step(30, 5, "InstancePatched", 3, 0),
		step(40, 6, "InstancePatched", 7, 0),
	}
	changes := []CountChange{
		{At: at(12), New: i64(5)}, // rev 2, 2 s
		{At: at(25), New: i64(5)}, // rev 4, 4 s (the count did not move in truth terms, but a write is a write)
		{At: at(31), New: i64(3)}, // rev 5, 1 s
		{At: at(38), New: i64(1)}, // floor: unmatched
		{At: at(50), New: i64(7)}, // rev 6, 10 s
		{At: at(51), New: nil},    // unmatched
	}
	lags := ComputeLags(steps, changes)
	st := Stats("n", steps, lags, 9)
	want := NodeStats{Node: "n", Writes: 9, CountChanges: 6, TruthChanges: 5, Missed: 1, Matched: 4, Unmatched: 2,
		LagMin: time.Second, LagMedian: 2 * time.Second, LagP90: 10 * time.Second, LagMax: 10 * time.Second}
	if st != want {
		t.Errorf("stats:\nexpected %+v\ngot      %+v", want, st)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    int
		want time.Duration
	}{{50, 5}, {90, 9}, {100, 10}, {1, 1}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%d: expected %d, got %d", tc.p, tc.want, got)
		}
	}
}
