package capacity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// logStep is one second of a logging scenario: the cloud's answer for the lookup made then.
type logStep struct {
	read *cloud.Capacity // nil: the lookup fails with Unavailable
	here *int64          // the node's live count from then on, if set
}

// fails is a failed lookup; ok(c) a successful one.
var fails = logStep{}

func ok(c *cloud.Capacity) logStep { return logStep{read: c} }

// repeat returns n copies of s.
func repeat(n int, s ...logStep) []logStep {
	var out []logStep
	for range n {
		out = append(out, s...)
	}
	return out
}

// runLogged drives a reporter with a 1s lookup interval, one lookup per step and second,
// and returns what it logged at verbosity v, one line per entry:
// "<message> key=value ..." with the keys given, in the order logged (the others are left
// out, so that the expected lines stay readable).
func runLogged(t *testing.T, v int, restore *PersistedState, steps []logStep, keys ...string) []string {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MinInterval, cfg.Jitter = time.Second, 0
	var here int64 = -1
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	if restore != nil {
		cfg.StatePath = t.TempDir() + "/capacity.json"
		s := *restore
		s.InstanceID = "i-1"
		if err := saveState(cfg.StatePath, s); err != nil {
			t.Fatal(err)
		}
	}
	r, clk, _ := newCountedReporter(t, cfg, src, func() (int, error) { return int(here), nil })
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(v), ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	for i, st := range steps {
		if st.here != nil {
			here = *st.here
		}
		if st.read != nil {
			src.set(st.read, nil)
		} else {
			src.set(nil, cloud.NewError(cloud.CodeUnavailable, "fault injected"))
		}
		if i == 0 {
			// The kubelet's first NodeGetInfo, as at registration.
			if _, err := r.MaxVolumesPerNode(ctx); err != nil {
				t.Fatal(err)
			}
		} else if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Second)
	}
	var lines []string
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		line := e.Message
		if e.Type == ktesting.LogError {
			line = "ERROR " + line
		}
		kv := append(append([]any{}, e.WithKVList...), e.ParameterKVList...)
		for i := 0; i+1 < len(kv); i += 2 {
			if k, _ := kv[i].(string); slices.Contains(keys, k) {
				line += fmt.Sprintf(" %s=%v", k, kv[i+1])
			}
		}
		lines = append(lines, line)
	}
	return lines
}

func TestReporterLogsAtTheDefaultVerbosity(t *testing.T) {
	r15 := reading(16, 1, 3, 100, 2)  // target 15
	r11 := reading(16, 5, 3, 100, 2)  // target 11
	r15b := reading(16, 1, 3, 100, 3) // target 15, a newer revision
	tests := []struct {
		name    string
		restore *PersistedState
		steps   []logStep
		keys    []string
		want    []string
	}{
		{
			name:  "steady state logs the first value only",
			steps: repeat(300, ok(r15)),
			keys:  []string{"value", "mode", "reason"},
			want:  []string{"Capacity reported value=15 mode=fresh reason=first reading"},
		},
		{
			name: "a flaky cloud logs one failing period, and its end after a quiet minute",
			steps: append(append([]logStep{ok(r15)},
				repeat(40, fails, ok(r15), ok(r15))...), // 120s, a third failing
				repeat(70, ok(r15))...),
			keys: []string{"class", "failures", "lookups", "failedFor"},
			want: []string{
				"Capacity reported",
				"ERROR Capacity lookups failing; the reported value is held (last known good, then the floor after stale-after) class=server",
				// First failure at 1s, last at 118s; recovered at 178s, the first lookup 60s after it.
				"Capacity lookups recovered failedFor=1m57s failures=40 lookups=178",
			},
		},
		{
			name: "a flaky cloud does not hold an increase back, and each step is logged",
			steps: append([]logStep{ok(r11)},
				repeat(15, ok(r15b), fails, ok(r15b))...), // 45s, a third failing
			keys: []string{"from", "to", "reason"},
			want: []string{
				"Capacity reported reason=" + ReasonFirstReading,
				"ERROR Capacity lookups failing; the reported value is held (last known good, then the floor after stale-after)",
				// Rising since 1s: the window ends at 31s, then one step per reading.
				"Capacity changed from=11 to=13 reason=" + ReasonIncreaseHeld,
				"Capacity changed from=13 to=15 reason=" + ReasonIncreaseHeld,
			},
		},
		{
			name: "an outage: failing, the floor, recovery and its ramp",
			steps: append(append(append([]logStep{ok(r15)},
				repeat(301, fails)...), // lookups fail from 1s: stale after 5m
				logStep{here: here(2)}), // failing still; a pod ended: the floor follows
				repeat(100, ok(r15b))...),
			keys: []string{"from", "to", "mode", "reason", "failures"},
			want: []string{
				"Capacity reported mode=fresh reason=" + ReasonFirstReading,
				"ERROR Capacity lookups failing; the reported value is held (last known good, then the floor after stale-after) mode=last-known-good",
				"Capacity changed from=15 to=3 mode=floor reason=" + ReasonStale,
				"Capacity mode changed from=last-known-good to=floor",
				"Capacity changed from=3 to=2 mode=floor reason=" + ReasonStale,
				"Capacity mode changed from=floor to=ramping",
				"Capacity changed from=2 to=4 mode=ramping reason=" + ReasonIncreaseHeld,
				"Capacity changed from=4 to=6 mode=ramping reason=" + ReasonIncreaseHeld,
				"Capacity changed from=6 to=8 mode=ramping reason=" + ReasonIncreaseHeld,
				"Capacity changed from=8 to=10 mode=ramping reason=" + ReasonIncreaseHeld,
				"Capacity changed from=10 to=12 mode=ramping reason=" + ReasonIncreaseHeld,
				"Capacity changed from=12 to=14 mode=ramping reason=" + ReasonIncreaseHeld,
				"Capacity changed from=14 to=15 mode=fresh reason=" + ReasonIncreaseHeld,
				// The last failure was at 302s, the quiet minute ends at 362s.
				"Capacity lookups recovered failures=302 mode=fresh",
			},
		},
		{
			name:    "a restored value confirmed by the cloud after a late answer",
			restore: &PersistedState{Version: 1, Reported: 15, Revision: 2, Attached: 3, GoodAt: t0.Add(-time.Minute)},
			steps:   []logStep{ok(reading(16, 1, 3, 100, 1)), ok(r15b), ok(r15b)},
			keys:    []string{"value", "from", "to", "mode", "reason"},
			want: []string{
				"Capacity reported value=15 mode=last-known-good reason=" + ReasonRestored,
				"Capacity mode changed from=last-known-good to=fresh value=15",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runLogged(t, 0, tc.restore, tc.steps, tc.keys...)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("logged at the default verbosity:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// Every failed lookup stays visible at V(2).
func TestReporterLogsEveryFailureAtV2(t *testing.T) {
	steps := append([]logStep{ok(reading(16, 1, 3, 100, 1))}, repeat(10, fails, ok(reading(16, 1, 3, 100, 1)))...)
	n := 0
	for _, line := range runLogged(t, 2, nil, steps) {
		if line == "Capacity lookup failed" {
			n++
		}
	}
	if n != 10 {
		t.Errorf("%d \"Capacity lookup failed\" lines at V(2), want 10", n)
	}
}
