package scenario

import (
	"strings"
	"testing"
	"time"
)

// TestDescribeNodeOneWordingPerState: a plugin's line says whether it is settled and, when
// not, why and for how long, so that a summary never lists as "mode fresh … window 30s" a
// plugin it then waits for because it "raised its value lately" (issue 26's newcomer trial),
// and names the node once ("node-a1", not "node node-a1").
func TestDescribeNodeOneWordingPerState(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	state := func(mode string, reported int64, target *int64, window string, damping int, in float64) NodeState {
		st := NodeState{Mode: mode, Reported: reported, Target: target, StabilityWindow: window, Damping: damping, SettledInSeconds: in}
		st.Config.StabilityWindow, st.Config.MaxStabilityWindow = "30s", "4m0s"
		return st
	}
	tests := []struct {
		name    string
		st      NodeState
		line    string
		settled bool
		in      time.Duration
		atLeast bool
	}{
		{"settled", state("fresh", 7, i(7), "30s", 0, 0), "node-a2: reports 7, mode fresh, stability window 30s; settled", true, 0, false},
		{"raised lately", state("fresh", 3, i(3), "30s", 0, 226),
			"node-a2: reports 3, mode fresh, stability window 30s; settles in 3m46s: it raised its value lately, and a decrease before then would count as a flap and double its window",
			false, 226 * time.Second, false},
		{"damped", state("fresh", 5, i(5), "1m0s", 1, 711),
			"node-a2: reports 5, mode fresh, stability window 1m0s (flap damping 1); settles in 11m51s, when its flap damping has decayed", false, 711 * time.Second, false},
		{"ramping: at least a max window after its next raise", state("ramping", 1, i(7), "30s", 0, 0),
			"node-a2: reports 1, mode ramping (the cloud's value: 7), stability window 30s; not settled until it is in mode fresh and 4m0s past its last raise (at least 4m0s from now)",
			false, 4 * time.Minute, true},
		{"last known good: unknown", state("last-known-good", 7, i(7), "30s", 0, 0),
			"node-a2: reports 7, mode last-known-good, stability window 30s; not settled until it is in mode fresh", false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := describeNode("node-a2", tt.st)
			if it.line != tt.line || it.settled != tt.settled || it.in != tt.in || it.atLeast != tt.atLeast {
				t.Errorf("got %q settled=%v in=%v atLeast=%v\nwant %q settled=%v in=%v atLeast=%v",
					it.line, it.settled, it.in, it.atLeast, tt.line, tt.settled, tt.in, tt.atLeast)
			}
			if strings.HasSuffix(it.line, "; settled") != it.settled || strings.Count(it.line, "node-a2") != 1 {
				t.Errorf("line %q: its end does not say settled=%v, or names the node more than once", it.line, it.settled)
			}
		})
	}
}
