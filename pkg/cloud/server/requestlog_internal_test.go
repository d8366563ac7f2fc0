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
	if reads, _, period := l.summary(false); period != 0 || reads != "" {
		t.Fatalf("summary after 1 s: %q over %v, want none before %v", reads, period, readSummaryPeriod)
	}
	now = now.Add(readSummaryPeriod)
	reads, dropped, period := l.summary(false)
	if reads != "getCapacity=2 listInstances=1" || dropped != 170 || period != readSummaryPeriod {
		t.Fatalf("summary: reads %q, dropped %d, period %v; want getCapacity=2 listInstances=1, 170, %v (from the first read)", reads, dropped, period, readSummaryPeriod)
	}
	now = now.Add(readSummaryPeriod)
	if reads, _, period := l.summary(false); period != 0 {
		t.Fatalf("a period with nothing to say summed up %q", reads)
	}
	if got := allowed(requestLogBurst); got != requestLogBurst {
		t.Fatalf("after a quiet period: %d shown, want the whole burst %d", got, requestLogBurst)
	}
}

// TestRequestLogQuietWhenOnlyReads: a period of successful reads alone (the plugins' polling
// while nothing changes) is not summed up at the default verbosity, which printed the same
// "Requests summed up" line every 10 s forever; at -v=2 it is. A period with a change (a
// line offered, shown or not) is summed up with its reads.
func TestRequestLogQuietWhenOnlyReads(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newRequestLog(func() time.Time { return now })
	poll := func() {
		for range 27 {
			l.read("getCapacity")
		}
		now = now.Add(readSummaryPeriod)
	}
	poll()
	if reads, dropped, period := l.summary(false); period != 0 {
		t.Fatalf("a period of reads alone at -v=0: summed up %q (dropped %d) over %v, want no line", reads, dropped, period)
	}
	poll() // the quiet period's reads were not carried over
	if reads, _, period := l.summary(true); reads != "getCapacity=27" || period != readSummaryPeriod {
		t.Fatalf("a period of reads alone at -v=2: %q over %v, want getCapacity=27 over %v", reads, period, readSummaryPeriod)
	}
	l.allow() // a change's line
	poll()
	if reads, _, period := l.summary(false); reads != "getCapacity=27" || period != readSummaryPeriod {
		t.Fatalf("a period with a change at -v=0: %q over %v, want getCapacity=27 over %v", reads, period, readSummaryPeriod)
	}
	poll()
	if _, _, period := l.summary(false); period != 0 {
		t.Fatalf("the change counted past its period: the next period of reads alone was summed up")
	}
}
