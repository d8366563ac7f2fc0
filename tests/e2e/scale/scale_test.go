package scale

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fakecloud/fakecloud-csi/tests/e2e/capacityplot"
)

func TestOptionsValidate(t *testing.T) {
	ok := DefaultOptions("/repo", "/bin")
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want []string
	}{
		{"defaults", func(*Options) {}, nil},
		{"every problem at once", func(o *Options) {
			o.Nodes = []int{0, MaxNodes + 1}
			o.Periods = []time.Duration{5 * time.Second, 10500 * time.Millisecond}
			o.MinInterval = 0
		}, []string{"node count 0", "node count 501", "period 5s", "period 10.5s", "min interval"}},
		{"no nodes, no periods", func(o *Options) { o.Nodes, o.Periods = nil, nil }, []string{"at least one node count"}},
		{"the cluster only grows", func(o *Options) { o.Nodes = []int{10, 30, 30} }, []string{"each must be above the one before"}},
		{"nor shrinks", func(o *Options) { o.Nodes = []int{30, 10} }, []string{"each must be above the one before"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: nil, want errors")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v; want it to mention %q", err, w)
				}
			}
		})
	}
}

// The script touches one node in ten (the first of each ten), squeezes the quota to its
// use + 2 with noise that stays within ±1, restores it, and brackets an outage.
func TestScript(t *testing.T) {
	var nodes []string
	oob := map[string]int{}
	for i := range 25 {
		id := "node-" + string(rune('a'+i))
		nodes = append(nodes, id)
		oob[id] = i % 3
	}
	sc, err := Script(ScriptInput{Nodes: nodes, OutOfBand: oob, Quota: 250, Used: 20, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	patched := map[string][]int{}
	var quotas []int64
	var faults, deletes int
	for _, s := range sc.Steps {
		switch {
		case s.Instance != nil:
			patched[s.Instance.ID] = append(patched[s.Instance.ID], *s.Instance.OutOfBandSlots)
		case s.Quotas != nil:
			quotas = append(quotas, *s.Quotas.Attachments)
		case s.Fault != nil:
			faults++
		case s.DeleteFault != "":
			deletes++
		}
		if d := time.Duration(s.At); d < 0 || d > ScriptLength {
			t.Errorf("step at %s outside the script's %s", d, ScriptLength)
		}
	}
	if len(patched) != 3 {
		t.Errorf("patched %d nodes, want 3 of 25 (one in %d): %v", len(patched), OOBEvery, patched)
	}
	for _, id := range []string{nodes[0], nodes[10], nodes[20]} {
		if got := patched[id]; len(got) != 2 || got[0] != oob[id]+oobExtra || got[1] != oob[id] {
			t.Errorf("%s: out-of-band patches %v, want [%d %d]", id, got, oob[id]+oobExtra, oob[id])
		}
	}
	if len(quotas) < 3 || quotas[len(quotas)-1] != 250 {
		t.Fatalf("quota steps %v: want noise then the restore to 250", quotas)
	}
	for _, q := range quotas[:len(quotas)-1] {
		if q < 21 || q > 23 {
			t.Errorf("squeezed quota %d outside used+2±1 = 21..23", q)
		}
	}
	if faults != 1 || deletes != 1 {
		t.Errorf("%d fault and %d delete steps, want 1 and 1", faults, deletes)
	}
}

const apiMetrics = `# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="storage.k8s.io",resource="csinodes",scope="resource",subresource="",verb="GET",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="storage.k8s.io",resource="csinodes",scope="resource",subresource="",verb="PUT",version="v1"} 5
apiserver_request_total{code="409",component="apiserver",dry_run="",group="storage.k8s.io",resource="csinodes",scope="resource",subresource="",verb="PUT",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 50
apiserver_request_total{code="200",component="apiserver",dry_run="",group="storage.k8s.io",resource="csinodes",scope="cluster",subresource="",verb="LIST",version="v1"} 4
`

func TestAPIRequests(t *testing.T) {
	mf, err := parseMetrics(strings.NewReader(apiMetrics))
	if err != nil {
		t.Fatal(err)
	}
	got := apiRequests(mf)
	want := map[RequestKey]float64{"GET csinodes": 40, "PUT csinodes": 6, "PATCH nodes/status": 50, "LIST csinodes": 4}
	if len(got) != len(want) {
		t.Errorf("apiRequests = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k, capa := range map[RequestKey]bool{"GET csinodes": true, "PUT csinodes": true, "UPDATE csinodes": false, "LIST csinodes": false, "WATCH csinodes": false, "PATCH nodes/status": false} {
		if IsCapacityRequest(k) != capa {
			t.Errorf("IsCapacityRequest(%s) = %v, want %v", k, !capa, capa)
		}
	}
	if s := sumCounter(mf, "apiserver_request_total", map[string]string{"resource": "csinodes", "verb": "PUT"}); s != 6 {
		t.Errorf("sumCounter PUT csinodes = %v, want 6", s)
	}
}

func TestParseProc(t *testing.T) {
	// A command name with a space and a parenthesis; utime 250, stime 50 ticks.
	stat := "4242 (driver (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 39 19 12 0 100 700000 3000"
	cpu, err := parseProcStat(stat)
	if err != nil || cpu != 3*time.Second {
		t.Errorf("parseProcStat = %s, %v; want 3s", cpu, err)
	}
	if _, err := parseProcStat("4242 driver S 1"); err == nil {
		t.Error("parseProcStat without a command name: nil error")
	}
	rss, err := parseRSS("Name:\tdriver\nVmRSS:\t   20480 kB\nThreads: 9\n")
	if err != nil || rss != 20<<20 {
		t.Errorf("parseRSS = %d, %v; want %d", rss, err, 20<<20)
	}
	if _, err := parseRSS("Name: x\n"); err == nil {
		t.Error("parseRSS without VmRSS: nil error")
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ q, want float64 }{{0.5, 5}, {0.99, 10}, {1, 10}, {0.1, 1}} {
		if got := quantile(xs, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile of nothing = %v, want 0", got)
	}
}

func i64(v int64) *int64 { return &v }

// fill turns two snapshots and a recording into the phase's rates and shares.
func TestFill(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := t0.Add
	// The readings of one snapshot are spread over seconds: rates use each one's own time.
	before := snapshot{at: t0, apiAt: at(2 * time.Second), api: map[RequestKey]float64{"GET csinodes": 100, "PATCH nodes/status": 100},
		cloudGetCapa: reading{at: at(time.Second), v: 10},
		lookups:      map[string]reading{"n1": {at: t0, v: 5}, "n2": {at: at(5 * time.Second), v: 5}},
		plugins:      map[string]procReading{"n1": {at: t0, ProcStat: ProcStat{CPU: time.Second}}, "n2": {at: t0, ProcStat: ProcStat{CPU: time.Second}}}}
	after := snapshot{at: at(100 * time.Second), apiAt: at(102 * time.Second), api: map[RequestKey]float64{"GET csinodes": 120, "PUT csinodes": 5, "PATCH nodes/status": 175},
		cloudGetCapa: reading{at: at(101 * time.Second), v: 60},
		lookups:      map[string]reading{"n1": {at: at(100 * time.Second), v: 25}, "n2": {at: at(125 * time.Second), v: 25}},
		plugins: map[string]procReading{"n1": {at: at(100 * time.Second), ProcStat: ProcStat{CPU: 3 * time.Second, RSS: 30 << 20}},
			"n2": {at: at(100 * time.Second), ProcStat: ProcStat{CPU: 2 * time.Second, RSS: 10 << 20}}}}
	change := func(node string, at time.Duration, old, cur int64) capacityplot.CountChange {
		return capacityplot.CountChange{Node: node, At: t0.Add(at), Old: i64(old), New: i64(cur)}
	}
	rec := &capacityplot.Recording{Nodes: []string{"n1", "n2"}, Writes: map[string]int{"n1": 3, "n2": 1},
		Truth: map[string][]capacityplot.TruthStep{
			"n1": {{At: t0, Truth: 7}, {At: t0.Add(10 * time.Second), Truth: 3}, {At: t0.Add(50 * time.Second), Truth: 7}},
			"n2": {{At: t0, Truth: 3}, {At: t0.Add(10 * time.Second), Truth: 2}},
		},
		Lags: map[string][]capacityplot.Lag{
			"n1": {{Change: change("n1", 14*time.Second, 7, 3), Matched: true, Lag: 4 * time.Second}, {Change: change("n1", 90*time.Second, 3, 7), Matched: true, Lag: 40 * time.Second}},
			"n2": {{Change: change("n2", 12*time.Second, 3, 2), Matched: true, Lag: 2 * time.Second}},
		}}
	var ph Phase
	ph.Nodes = 2
	fill(&ph, before, after, rec, 5*time.Second)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"writes/s", ph.WritesPerSecond, 0.04},
		{"writes/node/min", ph.WritesPerNodePerMinute, 1.2},
		{"writes per truth change", ph.WritesPerTruthChange, 4.0 / 3},
		{"API req/s", ph.APIRequestsPerSecond, 1},
		{"capacity req/s", ph.CapacityRequestsPerSecond, 0.25},
		{"capacity share", ph.CapacityShare, 0.25},
		{"lookups/s, each plugin over its own interval", ph.LookupsPerSecond, 0.2 + 20.0/120},
		{"lookup bound", ph.LookupBound, 0.4},
		{"cloud getCapacity/s", ph.CloudGetCapacityPerSecond, 0.5},
		{"lag p50", ph.LagP50, 4},
		{"lag max", ph.LagMax, 40},
		{"decrease lag max", ph.LagDecreaseMax, 4},
		{"plugin CPU %", ph.PluginCPUPercent, 1.5},
		{"plugin RSS MiB", ph.PluginRSSMiB, 20},
		{"plugin RSS max MiB", ph.PluginRSSMaxMiB, 30},
	} {
		if d := c.got - c.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if ph.TruthChanges != 3 || ph.CSINodeWrites != 4 || ph.Matched != 3 || ph.LagDecreaseCount != 2 {
		t.Errorf("truth changes %d, writes %d, matched %d, decreases %d; want 3, 4, 3, 2", ph.TruthChanges, ph.CSINodeWrites, ph.Matched, ph.LagDecreaseCount)
	}
}

func TestWriteTableAndHTML(t *testing.T) {
	r := &Results{Started: time.Unix(0, 0), Host: Host{CPUs: 2, MemoryGB: 24}, MinIntervalSeconds: 5, Clusters: []Cluster{
		{Nodes: 30, GrownFrom: 10, StartSeconds: 42, Phases: []Phase{{Nodes: 30, PeriodSeconds: 60, WritesPerSecond: 0.5, LookupBound: 6}, {Nodes: 30, PeriodSeconds: 10, WritesPerSecond: 1.5, LookupBound: 6}}},
		{Nodes: 10, Phases: []Phase{{Nodes: 10, PeriodSeconds: 10, WritesPerSecond: 0.25, LookupBound: 2, PodsAtEnd: PodCounts{Stuck: 1}}}, Error: "boom"},
	}, Stopped: "N=10: boom"}
	var tb bytes.Buffer
	if err := WriteTable(&tb, r); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(tb.String()), "\n")
	if !strings.HasPrefix(rows[2], "| 10 | 10 s | 0.25 |") || !strings.HasPrefix(rows[3], "| 30 | 10 s | 1.50 |") || !strings.HasPrefix(rows[4], "| 30 | 60 s | 0.50 |") {
		t.Errorf("rows not by N then period:\n%s", tb.String())
	}
	if !strings.Contains(tb.String(), "N=30: grown from 10 nodes in 42 s") || !strings.Contains(tb.String(), "N=10: started in 0 s") {
		t.Errorf("table lacks how each count came up:\n%s", tb.String())
	}
	if !strings.Contains(tb.String(), "stopped: boom") || !strings.Contains(tb.String(), "run stopped early: N=10: boom") {
		t.Errorf("table lacks the stop:\n%s", tb.String())
	}
	var hb bytes.Buffer
	if err := WriteHTML(&hb, r); err != nil {
		t.Fatal(err)
	}
	page := hb.String()
	if n := strings.Count(page, "<svg "); n != len(figures()) {
		t.Errorf("%d charts, want one per figure (%d)", n, len(figures()))
	}
	if !strings.Contains(page, "period 60 s") || strings.Contains(page, "<script") {
		t.Error("page lacks the period legend or carries a script")
	}
}

func TestMerge(t *testing.T) {
	r := &Results{Clusters: []Cluster{{Nodes: 30}, {Nodes: 10}}}
	r.Merge(&Results{Clusters: []Cluster{{Nodes: 100, StartSeconds: 1, Error: "did not start"}, {Nodes: 10, StartSeconds: 2}}, Stopped: "N=100: did not start"})
	var got []int
	for _, c := range r.Clusters {
		got = append(got, c.Nodes)
		if c.Nodes == 10 && c.StartSeconds != 0 {
			t.Error("a node count both runs measured took the second run's")
		}
	}
	if len(got) != 3 || got[0] != 10 || got[1] != 30 || got[2] != 100 {
		t.Errorf("merged node counts %v, want [10 30 100]", got)
	}
	if r.Stopped != "N=100: did not start" {
		t.Errorf("Stopped = %q", r.Stopped)
	}
}

func TestScheduledAt(t *testing.T) {
	created, bound := time.Unix(100, 0), time.Unix(400, 0)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	if got := scheduledAt(p); !got.Equal(created) {
		t.Errorf("unscheduled pod: %s, want its creation %s", got, created)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(bound)}}
	if got := scheduledAt(p); !got.Equal(bound) {
		t.Errorf("scheduled pod: %s, want the binding %s", got, bound)
	}
}

// One cluster for every count: it seeds the largest count's instances, starts the first, and
// gives the quota the first count's 10 per node (Run raises it as nodes join).
func TestClusterOptions(t *testing.T) {
	o := DefaultOptions("/repo", "/bin")
	co := o.clusterOptions(10, 30, "/tmp/run")
	if len(co.Nodes) != 30 || co.StartNodes != 10 || co.StartBatch != startBatch {
		t.Fatalf("%d nodes, start %d, batch %d; want 30, 10, %d", len(co.Nodes), co.StartNodes, co.StartBatch, startBatch)
	}
	if co.AttachmentQuota != 100 || co.VolumeQuota != 20*30+200 {
		t.Errorf("quotas: attachments %d, volumes %d; want 100 and %d", co.AttachmentQuota, co.VolumeQuota, 20*30+200)
	}
	slots := map[int]int{}
	for i, n := range co.Nodes {
		if want := fmt.Sprintf("node-%d", i+1); n.Name != want {
			t.Errorf("node %d is %s, want %s", i, n.Name, want)
		}
		slots[n.MaxAttachments-n.OutOfBandSlots]++
	}
	if slots[7] != 20 || slots[3] != 10 {
		t.Errorf("free slots per node %v: want the e2e shapes 7, 3, 7 repeated", slots)
	}
}

// The workload keeps one pod per node: at 2 it replaces the oldest; resized to 4 as the
// cluster grows, it only adds until it has 4.
func TestWorkloadResize(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	w, err := startWorkload(ctx, cs, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pods := func() []string {
		l, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		return names
	}
	for range 3 {
		w.step(ctx)
	}
	if got := pods(); strings.Join(got, ",") != "w-2,w-3" {
		t.Errorf("keeping 2 after 3 steps: pods %v, want w-2,w-3", got)
	}
	w.resize(4, time.Second)
	for range 2 {
		w.step(ctx)
	}
	if got := pods(); strings.Join(got, ",") != "w-2,w-3,w-4,w-5" {
		t.Errorf("resized to 4, 2 steps: pods %v, want w-2..w-5", got)
	}
	w.step(ctx)
	if got := pods(); strings.Join(got, ",") != "w-3,w-4,w-5,w-6" {
		t.Errorf("at 4, one more step: pods %v, want the oldest replaced", got)
	}
	if created, errs, _ := w.stats(); created != 6 || errs != 0 {
		t.Errorf("stats: %d created, %d errors; want 6, 0", created, errs)
	}
}
