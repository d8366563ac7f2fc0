package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// TestCompare replays every trace on a smaller cluster and checks what the comparison is
// for: same seed, same numbers; the policy fails fewer attaches than both other reporters;
// it writes CSINode far less than the naive reporter under noise.
func TestCompare(t *testing.T) {
	p := defaultParams()
	p.Nodes = 4
	p.ArrivalPS /= 2
	a, err := compare(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := compare(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs with seed %d differ:\n%v\n%v", p.Seed, a, b)
	}
	var policy, static, naive result
	for _, sc := range scenarios(p.Nodes) {
		policy.add(a[sc.name]["policy"])
		static.add(a[sc.name]["static"])
		naive.add(a[sc.name]["naive"])
		if w := a[sc.name]["static"].Writes; w != 0 {
			t.Errorf("%s: the static reporter wrote CSINode %d times", sc.name, w)
		}
	}
	if policy.AttachFailures >= naive.AttachFailures || policy.AttachFailures*4 >= static.AttachFailures {
		t.Errorf("attach failures: policy %d, naive %d, static %d", policy.AttachFailures, naive.AttachFailures, static.AttachFailures)
	}
	if g := checkGoals(p, a); !g.writesMet() {
		t.Errorf("writes under noise: %s", g)
	}
}

// TestFlakyLookupsDoNotHoldIncreasesBack replays the flaky trace (30% of lookups fail) with
// the 1s lookup interval of the trial that found the problem: when every failure restarted
// the stability window, an increase needed ~30 successes in a row and the policy's pods
// waited about 15 times as long as the oracle's; failures now say nothing against it.
func TestFlakyLookupsDoNotHoldIncreasesBack(t *testing.T) {
	p := defaultParams()
	p.Nodes = 4
	p.ArrivalPS /= 2
	p.Capacity.MinInterval = time.Second
	a, err := compare(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	policy, oracle := a["flaky"]["policy"], a["flaky"]["oracle (reference)"]
	if policy.PendingPodMin > 1.3*oracle.PendingPodMin || policy.Started != oracle.Started {
		t.Errorf("flaky trace: policy %.0f pending pod-min and %d pods started, oracle %.0f and %d; want at most 1.3× the waiting and the same pods",
			policy.PendingPodMin, policy.Started, oracle.PendingPodMin, oracle.Started)
	}
}

func TestRunPrintsTableAndRejectsBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"--nodes=2", "--duration=1h40m"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v (%s)", err, errOut.String())
	}
	for _, want := range []string{"| scenario | reporter |", "| noise | policy |", "Goal 1", "Goal 2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	err := run(context.Background(), []string{"--nodes=0", "--period=1500ms", "--quota-share=half", "--duration=1m"}, &out, &errOut)
	if err == nil {
		t.Fatal("run with bad flags = nil")
	}
	for _, want := range []string{"nodes", "period", "quota-share", "duration"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestLiveFloorFollowsDetachesDuringAnOutage replays the outage trace with the floor fed by
// the node's live count and with the last reading's count: only the live count keeps the
// scheduler from refilling slots freed while the limit fell unseen.
func TestLiveFloorFollowsDetachesDuringAnOutage(t *testing.T) {
	p := defaultParams()
	p.Nodes = 4
	p.ArrivalPS /= 2
	var sc scenario
	idx := -1
	for i, s := range scenarios(p.Nodes) {
		if s.name == "outage" {
			sc, idx = s, i
		}
	}
	if idx < 0 {
		t.Fatal("no outage scenario")
	}
	run := func(live bool) result {
		pp := p
		pp.LiveFloor = live
		w := newWorld(pp)
		rep, err := newPolicyReporter(pp, w)
		if err != nil {
			t.Fatal(err)
		}
		return simulate(pp, sc, newWorkload(pp, sc, idx), w, rep)
	}
	live, last := run(true), run(false)
	if live.AttachFailures*2 >= last.AttachFailures {
		t.Errorf("outage attach failures: live floor %d, last-reading floor %d; want the live floor to halve them at least", live.AttachFailures, last.AttachFailures)
	}
	if live.Started != last.Started {
		t.Errorf("pods started: live floor %d, last-reading floor %d; the same workload must finish", live.Started, last.Started)
	}
}

// TestImpairedNodesGetNoNewPods replays the impaired trace: the policy's floor for an
// impaired node keeps new pods off it, so far fewer pods wait on refused attaches than when
// the policy holds its value (health ignored), the total waiting stays near the oracle's, no
// pod is rejected, and every reporter starts the same pods.
func TestImpairedNodesGetNoNewPods(t *testing.T) {
	p := defaultParams()
	p.Nodes = 4
	p.ArrivalPS /= 2
	a, err := compare(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	r := a["impaired"]
	policy, blind, oracle := r["policy"], r[reporterHealthBlind], r["oracle (reference)"]
	if policy.StuckPodMin*5 > blind.StuckPodMin {
		t.Errorf("stuck pod-min: policy %.0f, health ignored %.0f; want at most a fifth", policy.StuckPodMin, blind.StuckPodMin)
	}
	if wait, ref := policy.StuckPodMin+policy.PendingPodMin, oracle.StuckPodMin+oracle.PendingPodMin; wait > 1.2*ref {
		t.Errorf("waiting pod-min: policy %.0f, oracle %.0f; want at most 1.2×", wait, ref)
	}
	for name, res := range r {
		if res.Rejected != 0 {
			t.Errorf("%s: %d pods rejected; an impaired node's refusals are retryable", name, res.Rejected)
		}
		if res.Started != oracle.Started {
			t.Errorf("%s: %d pods started, oracle %d", name, res.Started, oracle.Started)
		}
	}
}

// BenchmarkFleetNodeSecond measures what the fleet mode costs: one simulated node-second
// (the Reporter's refresh, the kubelet's copy, the scheduler's and attacher's share) of the
// quota-cut trace with the even share on 1,000 nodes for an hour. A 10,000-node hour costs
// 3.6e7 of them per run.
func BenchmarkFleetNodeSecond(b *testing.B) {
	p := defaultFleetParams()
	sc := fleetScenarios()[1]
	wl := newFleetWorkload(p, 1000, 1)
	b.ResetTimer()
	for b.Loop() {
		if _, err := simulateFleet(p, fleetRun{sc: sc, share: capacity.QuotaShareEven, nodes: 1000, period: 10}, wl, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(1000*p.Duration), "ns/node-second")
}

// TestFleetBurstAndSpread runs the quota-cut trace on 40 nodes for 15 min: the cut reaches every node
// within one kubelet period plus one lookup interval (decreases are never delayed, spread or
// not), the increase spread staggers the nodes' writes when the quota is restored, the same seed gives
// the same figures, and steady churn costs about one write per real change.
func TestFleetBurstAndSpread(t *testing.T) {
	p := defaultFleetParams()
	p.Duration = 900
	var cut, steady fleetScenario
	for _, sc := range fleetScenarios() {
		switch sc.name {
		case "quota-cut":
			cut = sc
		case "steady":
			steady = sc
		}
	}
	const nodes, period = 40, 10
	wl := newFleetWorkload(p, nodes, 1)
	runOne := func(sc fleetScenario, share capacity.QuotaShare, spread time.Duration, wl fleetWorkload) fleetResult {
		t.Helper()
		r, err := simulateFleet(p, fleetRun{sc: sc, share: share, nodes: nodes, period: period, spread: spread}, wl, 1)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	off, on := runOne(cut, capacity.QuotaShareEven, 0, wl), runOne(cut, capacity.QuotaShareEven, time.Minute, wl)
	if again := runOne(cut, capacity.QuotaShareEven, 0, wl); !reflect.DeepEqual(off, again) {
		t.Fatalf("two runs with seed %d differ:\n%+v\n%+v", p.Seed, off, again)
	}
	interval := p.Capacity.MinInterval + time.Duration(p.Capacity.Jitter*float64(p.Capacity.MinInterval))
	within := period + int(interval/time.Second) + 1
	for name, r := range map[string]fleetResult{"spread off": off, "spread 1m": on} {
		if len(r.Bursts) != 2 {
			t.Fatalf("%s: %d bursts, want the cut and the restore", name, len(r.Bursts))
		}
		if b := r.Bursts[0]; b.NodesWriting != nodes || b.FirstP99+1 > within {
			t.Errorf("%s: after the cut %d of %d nodes wrote, 99%% within %ds; want all within %ds", name, b.NodesWriting, nodes, b.FirstP99+1, within)
		}
	}
	// The peak of a 40-node burst is a few writes, too few to compare; when the nodes first
	// wrote is what the spread moves (docs/fleet-scale.md's 10,000-node runs show the peak).
	if a, b := off.Bursts[1].FirstHalf, on.Bursts[1].FirstHalf; b <= a {
		t.Errorf("after the restore half the nodes had written within %ds with the spread, %ds without; want later with it", b+1, a+1)
	}
	s := runOne(steady, capacity.QuotaShareNone, 0, newFleetWorkload(p, nodes, 0))
	if s.WritesPerChange < 0.8 || s.WritesPerChange > 1.1 || s.CapacityChanges == 0 {
		t.Errorf("steady churn: %d writes for %d capacity changes (%.2f each), want about one each", s.CSINodeWrites, s.CapacityChanges, s.WritesPerChange)
	}
	if lpm := s.LookupsPerNodeMinute; lpm < 9 || lpm > 12.1 {
		t.Errorf("steady churn: %.1f lookups per node-minute, want 60/(5..6 s) = 10..12", lpm)
	}
}

func TestFleetPlanReportsEveryProblem(t *testing.T) {
	_, err := fleetPlan(fleetOptions{nodes: "1", periods: "0", scenarios: "nope", shares: "most", spread: -time.Second, duration: time.Minute, at: 1})
	if err == nil {
		t.Fatal("fleetPlan with bad options = nil")
	}
	for _, want := range []string{"fleet-nodes", "fleet-periods", "fleet-scenarios", "fleet-shares", "fleet-spread", "fleet-duration", "fleet-at"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	runs, err := fleetPlan(fleetOptions{nodes: "10,30", periods: "10,60", scenarios: "all", shares: "none,even", spread: time.Minute, duration: time.Hour, at: 5000})
	if err != nil {
		t.Fatal(err)
	}
	// 3 scenarios × 2 shares × 2 sizes × 2 periods, and the spread runs of quota-cut/even.
	if want := 3*2*2*2 + 2*2; len(runs) != want {
		t.Errorf("%d runs, want %d", len(runs), want)
	}
}

// TestFleetLegendNamesTheScenariosRun: the legend under the tables describes the scenarios
// that have rows, and no other.
func TestFleetLegendNamesTheScenariosRun(t *testing.T) {
	for _, tc := range []struct {
		ran, absent []string
	}{
		{ran: []string{"steady", "quota-cut"}, absent: []string{"exhausted"}},
		{ran: []string{"exhausted"}, absent: []string{"steady", "quota-cut"}},
		{ran: []string{"steady", "quota-cut", "exhausted"}},
	} {
		var rs []fleetResult
		for _, name := range tc.ran {
			rs = append(rs, fleetResult{Scenario: name, Nodes: 1})
		}
		var out strings.Builder
		printFleet(&out, defaultFleetParams(), fleetOptions{duration: time.Minute, at: 1}, rs)
		for _, name := range tc.ran {
			if !strings.Contains(out.String(), "\n- "+name+": ") {
				t.Errorf("ran %v: no legend line for %s in\n%s", tc.ran, name, out.String())
			}
		}
		for _, name := range tc.absent {
			if strings.Contains(out.String(), "\n- "+name+": ") {
				t.Errorf("ran %v: a legend line for %s, which did not run, in\n%s", tc.ran, name, out.String())
			}
		}
	}
}
