package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bounds of the request log at the default verbosity (-v=0), where `make run` shows it in the
// terminal: a flood of requests or fault firings must not fill the terminal, and the node
// plugins' steady capacity polling (one GET a second each) must not bury the changes.
const (
	// requestLogRate and requestLogBurst bound the lines a second: a token bucket, so a
	// burst of a few dozen changes shows whole and a flood shows its first lines, then a count.
	requestLogRate  = 10
	requestLogBurst = 20
	// readSummaryPeriod is how often successful reads are summed up in one line instead of
	// one line each.
	readSummaryPeriod = 10 * time.Second
)

// requestLog decides what the fake cloud logs at the default verbosity: every change and
// every error one line each (at most requestLogRate a second after a burst of
// requestLogBurst), successful reads counted per route and summed up once per
// readSummaryPeriod, with the lines the rate limit dropped. A period of reads alone (the node
// plugins' polling while nothing changes) is summed up at -v=2 only: at the default
// verbosity it would print the same line every readSummaryPeriod forever; /metrics counts
// those reads anyway (fakecloud_requests_total). At -v=4 every request has its own line
// anyway ("Request served") and this log stays out of the way.
type requestLog struct {
	now func() time.Time

	mu      sync.Mutex
	tokens  float64
	refill  time.Time // when tokens were last topped up
	dropped int
	// lines counts the lines offered (allow) in the current summary period, shown or not:
	// changes, errors and fault firings, what makes a period worth a summary.
	lines int
	reads map[string]int
	since time.Time // start of the current summary period
}

func newRequestLog(now func() time.Time) *requestLog {
	return &requestLog{now: now, tokens: requestLogBurst, reads: map[string]int{}}
}

// allow reports whether one more line may be logged now; a refused line is counted for the
// next summary.
func (l *requestLog) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.refill.IsZero() {
		l.tokens = min(requestLogBurst, l.tokens+now.Sub(l.refill).Seconds()*requestLogRate)
	}
	l.refill = now
	l.lines++
	if l.tokens < 1 {
		l.dropped++
		return false
	}
	l.tokens--
	return true
}

// read counts a successful read of route for the next summary.
func (l *requestLog) read(route string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.since.IsZero() {
		l.since = l.now()
	}
	l.reads[route]++
}

// summary returns the line that sums up the reads and dropped lines since the last one, and
// starts a new period, once readSummaryPeriod has passed since the period began; period 0
// before that or when there is nothing to say. A period of successful reads alone, with no
// other line offered (allow), has something to say only when verbose (-v=2): its reads are
// dropped and a new period starts.
func (l *requestLog) summary(verbose bool) (reads string, dropped int, period time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.since.IsZero() {
		l.since = now
	}
	period = now.Sub(l.since)
	if period < readSummaryPeriod || (len(l.reads) == 0 && l.dropped == 0) {
		return "", 0, 0
	}
	if !verbose && l.lines == 0 && l.dropped == 0 {
		clear(l.reads)
		l.since = now
		return "", 0, 0
	}
	parts := make([]string, 0, len(l.reads))
	for _, r := range slices.Sorted(maps.Keys(l.reads)) {
		parts = append(parts, fmt.Sprintf("%s=%d", r, l.reads[r]))
	}
	dropped = l.dropped
	l.reads, l.dropped, l.lines, l.since = map[string]int{}, 0, 0, now
	return strings.Join(parts, " "), dropped, period.Round(time.Second)
}
