package server

import (
	"testing"
	"time"
)

// TestRequestLogBounds: a burst of requestLogBurst lines shows, then requestLogRate a second;
// reads and refused lines are summed up once per readSummaryPeriod, then counted afresh.
func TestRequestLogBounds(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newRequestLog(func() time.Time { return now })
	allowed := func(n int) int {
		got := 0
		for range n {
			if l.allow() {
				got++
			}
		}
		return got
	}
	if got := allowed(100); got != requestLogBurst {
		t.Fatalf("a flood of 100 lines: %d shown, want the burst of %d", got, requestLogBurst)
	}
	now = now.Add(time.Second)
	if got := allowed(100); got != requestLogRate {
		t.Fatalf("one second later: %d shown, want %d", got, requestLogRate)
	}
	l.read("getCapacity")
	l.read("getCapacity")
	l.read("listInstances")
	if reads, _, period := l.summary(); period != 0 || reads != "" {
		t.Fatalf("summary after 1 s: %q over %v, want none before %v", reads, period, readSummaryPeriod)
	}
	now = now.Add(readSummaryPeriod)
	reads, dropped, period := l.summary()
	if reads != "getCapacity=2 listInstances=1" || dropped != 170 || period != readSummaryPeriod {
		t.Fatalf("summary: reads %q, dropped %d, period %v; want getCapacity=2 listInstances=1, 170, %v (from the first read)", reads, dropped, period, readSummaryPeriod)
	}
	now = now.Add(readSummaryPeriod)
	if reads, _, period := l.summary(); period != 0 {
		t.Fatalf("a period with nothing to say summed up %q", reads)
	}
	if got := allowed(requestLogBurst); got != requestLogBurst {
		t.Fatalf("after a quiet period: %d shown, want the whole burst %d", got, requestLogBurst)
	}
}
