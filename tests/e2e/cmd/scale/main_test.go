package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/tests/e2e/scale"
)

func TestParseLists(t *testing.T) {
	if got, err := parseInts("10, 30,100"); err != nil || len(got) != 3 || got[2] != 100 {
		t.Errorf("parseInts = %v, %v", got, err)
	}
	if _, err := parseInts("10,x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("parseInts(10,x): %v, want an error naming x", err)
	}
	if got, err := parseDurations("10s,1m"); err != nil || len(got) != 2 || got[1] != time.Minute {
		t.Errorf("parseDurations = %v, %v", got, err)
	}
	if _, err := parseDurations("10"); err == nil {
		t.Error("parseDurations(10): nil error for a duration without unit")
	}
}

// The smoke fails on a pod stuck at a phase's end or left in ContainerCreating by the drain,
// and on nothing else.
func TestCheckStuck(t *testing.T) {
	clean := &scale.Results{Clusters: []scale.Cluster{{Nodes: 5, Phases: []scale.Phase{{Nodes: 5, PeriodSeconds: 10}},
		AfterDrain: scale.PodCounts{Running: 5, Unscheduled: 1}}}}
	if err := checkStuck(clean); err != nil {
		t.Errorf("checkStuck(clean) = %v", err)
	}
	stuck := &scale.Results{Clusters: []scale.Cluster{{Nodes: 5, Phases: []scale.Phase{{Nodes: 5, PeriodSeconds: 10, PodsAtEnd: scale.PodCounts{Stuck: 2}}},
		AfterDrain: scale.PodCounts{ContainerCreating: 1}}}}
	err := checkStuck(stuck)
	if err == nil || !strings.Contains(err.Error(), "2 pods stuck") || !strings.Contains(err.Error(), "1 pods still in ContainerCreating") {
		t.Errorf("checkStuck(stuck) = %v, want both problems", err)
	}
}

// --fleet-json writes the comparison beside the results, and says so when nothing matches
// rather than writing an empty table.
func TestWriteComparison(t *testing.T) {
	dir := t.TempDir()
	res := &scale.Results{Clusters: []scale.Cluster{{Nodes: 10, Phases: []scale.Phase{{Nodes: 10, PeriodSeconds: 30, WritesPerSecond: 0.2}}}}}
	if err := writeComparison(dir, "", res); err != nil {
		t.Fatalf("without --fleet-json: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, scale.CompareFile)); !os.IsNotExist(err) {
		t.Errorf("without --fleet-json, %s exists (%v)", scale.CompareFile, err)
	}
	sim := filepath.Join(dir, "sim.jsonl")
	write := func(s string) {
		if err := os.WriteFile(sim, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"source":"bench/policy","scenario":"steady","quotaShare":"none","nodes":100,"periodSeconds":30}` + "\n")
	if err := writeComparison(dir, sim, res); err == nil || !strings.Contains(err.Error(), "no row") {
		t.Errorf("no matching row: %v, want an error", err)
	}
	write(`{"source":"bench/policy","scenario":"steady","quotaShare":"none","nodes":10,"periodSeconds":30,"csinodeWritesPerNodeHour":1.5}` + "\n")
	if err := writeComparison(dir, sim, res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, scale.CompareFile))
	if err != nil || !strings.Contains(string(data), "| 10 | 30 s | bench/policy | steady (none) | 1.50 |") {
		t.Errorf("comparison file: %v\n%s", err, data)
	}
}

// TestFlags: the flags land in the options (the run's own in scale.Options, -v as the
// components' verbosity); bad lists are refused naming every bad flag at once, before
// anything runs; an unknown flag names --help, which lists the flags and succeeds.
func TestFlags(t *testing.T) {
	var o options
	fs := pflag.NewFlagSet("scale", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--nodes=5", "--periods=10s", "--drain=1m", "--require-zero-stuck", "-v", "4", "--out-dir=/tmp/x", "--min-interval=30s"}); err != nil {
		t.Fatal(err)
	}
	d, err := o.lists()
	if err != nil || len(d.Nodes) != 1 || d.Nodes[0] != 5 || len(d.Periods) != 1 || d.Periods[0] != 10*time.Second ||
		d.Drain != time.Minute || d.Verbosity != 4 || !o.RequireZeroStuck || o.OutDir != "/tmp/x" || o.MinInterval != 30*time.Second ||
		d.Tail != scale.DefaultOptions("", "").Tail {
		t.Errorf("options %+v, run options %+v, %v", o, d, err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--nodes=5,x", "--periods=10"}, []string{`--nodes: "x" is not a number`, "--periods: "}},
		{[]string{"--bogus"}, []string{"unknown flag: --bogus (scale --help lists the flags)"}},
		{[]string{"--drain=soon"}, []string{`invalid argument "soon" for "--drain" flag`}},
		{[]string{"extra"}, []string{`unknown command "extra" for "scale"`}},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, &out, &out)
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v, want an error containing %q", tc.args, err, want)
			}
		}
		if out.Len() > 0 {
			t.Errorf("%q: output %q", tc.args, out.String())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); err != nil || !strings.Contains(out.String(), "--require-zero-stuck") || !strings.Contains(out.String(), "-v, --v int") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
}
