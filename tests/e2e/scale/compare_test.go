package scale

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// A phase in the comparison format: per node-hour and per node-minute from its per-second
// figures, under bench/policy's names.
func TestPhaseFleetRow(t *testing.T) {
	p := Phase{Nodes: 10, PeriodSeconds: 30, Seconds: 100, CSINodeWrites: 20, TruthChanges: 40, StaleAttachFailures: 1,
		WritesPerSecond: 0.2, WritesPerNodePerMinute: 1.2, WritesPerTruthChange: 0.5, LookupsPerSecond: 1.8}
	r := p.FleetRow()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"writes per node-hour", r.WritesPerNodeHour, 72},
		{"lookups per node-minute", r.LookupsPerNodeMinute, 10.8},
		{"writes/s", r.WritesPerSecond, 0.2},
		{"lookups/s", r.LookupsPerSecond, 1.8},
		{"writes per change", r.WritesPerChange, 0.5},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.Source != FleetSource || r.CapacityChanges != 40 || r.CSINodeWrites != 20 || r.AttachFailures != 1 {
		t.Errorf("row %+v: want source %q, 40 changes, 20 writes, 1 failure", r, FleetSource)
	}
}

// The measured rows and bench/policy's go through the same JSON: what one writes the join
// reads, matched on nodes and periodSeconds only.
func TestCompare(t *testing.T) {
	r := &Results{Clusters: []Cluster{
		{Nodes: 10, Phases: []Phase{{Nodes: 10, PeriodSeconds: 10, WritesPerSecond: 0.3}, {Nodes: 10, PeriodSeconds: 60, WritesPerSecond: 0.1}}},
		{Nodes: 30, Phases: []Phase{{Nodes: 30, PeriodSeconds: 10, WritesPerSecond: 0.9}}},
	}}
	// bench/policy's lines, with fields the join does not read (bursts, pods).
	sim := `{"source":"bench/policy","scenario":"steady","quotaShare":"none","nodes":10,"periodSeconds":10,"csinodeWritesPerNodeHour":1.01,"cloudLookupsPerNodeMinute":10,"podsStarted":7}

{"source":"bench/policy","scenario":"quota-cut","quotaShare":"even","nodes":10,"periodSeconds":10,"csinodeWritesPerNodeHour":15.1,"bursts":[{"at":600}]}
{"source":"bench/policy","scenario":"steady","quotaShare":"none","nodes":30,"periodSeconds":30,"csinodeWritesPerNodeHour":1.0}
`
	rows, err := ReadFleetRows(strings.NewReader(sim))
	if err != nil {
		t.Fatal(err)
	}
	cs := Compare(r, rows)
	if len(cs) != 1 || cs[0].Measured.Nodes != 10 || cs[0].Measured.PeriodSeconds != 10 {
		t.Fatalf("comparisons %+v: want only N=10 at 10 s (the others have no simulated row)", cs)
	}
	if got := cs[0].Simulated; len(got) != 2 || got[0].Scenario != "quota-cut" || got[1].Scenario != "steady" {
		t.Errorf("simulated rows %+v: want quota-cut then steady", got)
	}
	var b bytes.Buffer
	if err := WriteComparison(&b, cs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[2], "| make scale | scale-churn (none) |") || !strings.Contains(lines[4], "| bench/policy | steady (none) | 1.01 |") {
		t.Errorf("table:\n%s", b.String())
	}

	// What WriteFiles writes for the measured side reads back through the same parser.
	var out bytes.Buffer
	if err := WriteFleetRows(&out, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFleetRows(&out)
	if err != nil || len(back) != 3 || back[2].Nodes != 30 || back[2].WritesPerSecond != 0.9 {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func TestReadFleetRowsBounds(t *testing.T) {
	if _, err := ReadFleetRows(strings.NewReader(`{"nodes":10}` + "\n" + `{"nodes":`)); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a broken line: %v, want an error naming line 2", err)
	}
	long := `{"source":"` + strings.Repeat("x", maxFleetRowBytes) + `"}`
	if _, err := ReadFleetRows(strings.NewReader(long)); err == nil {
		t.Errorf("a line over %d bytes: nil error", maxFleetRowBytes)
	}
	ok := `{"source":"` + strings.Repeat("x", maxFleetRowBytes-100) + `"}`
	if rows, err := ReadFleetRows(strings.NewReader(ok)); err != nil || len(rows) != 1 {
		t.Errorf("a line just under the bound: %d rows, %v", len(rows), err)
	}
}
