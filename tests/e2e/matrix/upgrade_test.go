package matrix

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWalkValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Walk
		want string // "" valid
	}{
		{"issue 27's walk", DefaultWalk(), ""},
		{"one step", Walk{From: "v1.36.3", Steps: []string{"v1.37.2"}, PodsPerNode: 1}, ""},
		{"skips a minor", Walk{From: "v1.35.4", Steps: []string{"v1.37.2"}, PodsPerNode: 2}, "want the next minor"},
		{"downgrade", Walk{From: "v1.36.3", Steps: []string{"v1.35.4"}, PodsPerNode: 2}, "want the next minor"},
		{"beyond the hollow kubelets", Walk{From: "v1.37.2", Steps: []string{"v1.38.0"}, PodsPerNode: 2}, "minor 38 outside"},
		{"too old", Walk{From: "v1.33.1", Steps: []string{"v1.34.4"}, PodsPerNode: 2}, "minor 33 outside"},
		{"no steps", Walk{From: "v1.35.4", PodsPerNode: 2}, "want 1..3 versions"},
		{"no pods", Walk{From: "v1.35.4", Steps: []string{"v1.36.3"}}, "podsPerNode 0"},
		{"too many pods", Walk{From: "v1.35.4", Steps: []string{"v1.36.3"}, PodsPerNode: 4}, "podsPerNode 4"},
		{"not a version", Walk{From: "latest", Steps: []string{"v1.36.3"}, PodsPerNode: 2}, `from "latest"`},
	} {
		err := tc.w.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
	var built []string
	for _, b := range DefaultWalk().Builds() {
		built = append(built, b.Version+":"+strings.Join(b.Components, ","))
	}
	if want := []string{"v1.35.4:hollow-kubelet", "v1.36.3:hollow-kubelet"}; !reflect.DeepEqual(built, want) {
		t.Errorf("DefaultWalk().Builds = %v, want %v (v1.37.2 is the pinned set)", built, want)
	}
}

// A node is in a gap from the first sample without the driver (or with count 0) until the
// next sample with a count; the phase is the one the gap began in; gaps still open at the
// end are closed there.
func TestGapTracker(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	g := newGapTracker(t0)
	g.sample(at(0), "node-1", true, 7)
	g.sample(at(0), "node-2", true, 3)
	g.phase["node-1"] = "plugin"
	g.sample(at(200), "node-1", false, 0)
	g.phase["node-1"] = ""
	g.sample(at(400), "node-1", true, 0) // back without a count: still a gap
	g.sample(at(600), "node-1", true, 6)
	g.sample(at(600), "node-2", true, 0)
	gaps := g.close(at(1000))
	want := []Gap{
		{Node: "node-1", Start: 0.2, Seconds: 0.4, Absent: true, Phase: "plugin"},
		{Node: "node-2", Start: 0.6, Seconds: 0.4},
	}
	if len(gaps) != len(want) {
		t.Fatalf("gaps = %+v, want %+v", gaps, want)
	}
	for i := range want {
		got := gaps[i]
		if got.Node != want[i].Node || got.Absent != want[i].Absent || got.Phase != want[i].Phase ||
			abs(got.Start-want[i].Start) > 1e-9 || abs(got.Seconds-want[i].Seconds) > 1e-9 {
			t.Errorf("gap %d = %+v, want %+v", i, got, want[i])
		}
	}
	if g.min["node-1"] != 6 || g.min["node-2"] != 3 {
		t.Errorf("min = %v, want node-1 6, node-2 3", g.min)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestCloudDiff(t *testing.T) {
	before := map[string][]string{"node-1": {"vol-1", "vol-2"}, "node-2": {"vol-3"}}
	after := map[string][]string{"node-1": {"vol-1"}, "node-2": {"vol-3", "vol-2"}}
	lost, added := cloudDiff(before, after)
	if !reflect.DeepEqual(lost, []string{"node-1/vol-2"}) || !reflect.DeepEqual(added, []string{"node-2/vol-2"}) {
		t.Errorf("cloudDiff = lost %v, added %v; want node-1/vol-2 lost, node-2/vol-2 added", lost, added)
	}
	if lost, added := cloudDiff(before, before); lost != nil || added != nil {
		t.Errorf("cloudDiff of equal maps = %v, %v", lost, added)
	}
}

func TestUpgradeJudge(t *testing.T) {
	f := 9.5
	good := func() UpgradeResult {
		return UpgradeResult{Steps: []NodeUpgrade{{Node: "node-1", To: "v1.36.3", Decision: "dynamic", Reason: "supported"}},
			CountFollowed: true, CountFollowSeconds: &f}
	}
	for _, tc := range []struct {
		name   string
		change func(*UpgradeResult)
		want   string
	}{
		{"clean", func(*UpgradeResult) {}, "as expected"},
		{"kubelet gap", func(u *UpgradeResult) { u.CountGaps = []Gap{{Node: "node-1", Phase: "kubelet"}} }, "1 count gaps while a kubelet was upgraded"},
		{"gap between steps", func(u *UpgradeResult) { u.CountGaps = []Gap{{Node: "node-2"}} }, "1 count gaps between node upgrades"},
		{"plugin gap", func(u *UpgradeResult) { u.CountGaps = []Gap{{Node: "node-1", Phase: "plugin"}} }, "while a node plugin's pod was replaced"},
		{"lost attachment", func(u *UpgradeResult) { u.CloudLost = []string{"node-1/vol-1"} }, "lost [node-1/vol-1]"},
		{"VA not attached", func(u *UpgradeResult) { u.VAsNotAttached = map[string]float64{"csi-1": 3} }, "1 VolumeAttachments not attached"},
		{"pod replaced", func(u *UpgradeResult) { u.PodsNotRunning = map[string]float64{"node-1-0": 3} }, "1 pods not running"},
		{"volumes in use dropped", func(u *UpgradeResult) { u.VolumesInUseDropped = []string{"node-2"} }, "volumesInUse dropped on [node-2]"},
		{"static", func(u *UpgradeResult) { u.Steps[0].Decision, u.Steps[0].Reason = "static", "period-unset" }, "node-1 at v1.36.3 decided static (period-unset)"},
		{"no follow", func(u *UpgradeResult) { u.CountFollowed = false }, "did not follow"},
		{"error", func(u *UpgradeResult) { u.Errors = []string{"workload: x"} }, "error: workload: x"},
	} {
		u := good()
		tc.change(&u)
		u.judge()
		if (tc.want == "as expected") != (u.Outcome == "as expected") || !strings.Contains(u.Outcome, tc.want) {
			t.Errorf("%s: outcome %q, want it to say %q", tc.name, u.Outcome, tc.want)
		}
	}
}

// The upgrade results file round-trips; the doc's upgrade part shows the latest walk, its gaps
// with their phase, and says "planned" without one; a doc without the markers is not touched.
func TestUpgradeResultsAndDoc(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "upgrade.json")
	if us, err := ReadUpgrades(path); err != nil || us != nil {
		t.Fatalf("missing file = %v, %v", us, err)
	}
	ready := 4.2
	old := UpgradeResult{Walk: DefaultWalk(), Date: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC), Commit: "old1234", Outcome: "unexpected: old"}
	newer := UpgradeResult{Walk: DefaultWalk(), Date: time.Date(2026, 12, 6, 12, 30, 0, 0, time.UTC), Commit: "abc1234",
		Nodes: []string{"node-1"}, MinCount: map[string]int32{"node-1": 6}, Pods: 2, VolumeAttachments: 2,
		Steps:     []NodeUpgrade{{Node: "node-1", From: "v1.35.4", To: "v1.36.3", ReadySeconds: &ready, Decision: "dynamic", Reason: "supported", CountBefore: 7, CountAfter: 7}},
		CountGaps: []Gap{{Node: "node-1", Start: 30, Seconds: 1.2, Absent: true, Phase: "plugin"}},
		Outcome:   "unexpected: 1 count gaps while a node plugin's pod was replaced (re-registration)"}
	for _, u := range []UpgradeResult{newer, old} {
		if err := AppendUpgrade(path, u); err != nil {
			t.Fatal(err)
		}
	}
	us, err := ReadUpgrades(path)
	if err != nil || len(us) != 2 || us[0].Commit != "abc1234" {
		t.Fatalf("upgrades = %+v, %v", us, err)
	}
	doc := filepath.Join(dir, "doc.md")
	if err := os.WriteFile(doc, []byte("# x\n"+upgradeBegin+"\nold part\n"+upgradeEnd+"\ntail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteUpgradeDoc(doc, us); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(doc)
	s := string(got)
	for _, want := range []string{"| 1 | node-1 | v1.35.4 → v1.36.3 | 4.2 s |", "**The node plugins left running (`--keep-plugins`).** Planned (not run).", "dynamic (supported)", "| 7 → 7 |",
		"node-1 1.2 s at 30 s (driver not listed, its plugin's pod replaced)", "abc1234", "node-1 6"} {
		if !strings.Contains(s, want) {
			t.Errorf("doc lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old part") || strings.Contains(s, "old1234") || !strings.HasSuffix(s, upgradeEnd+"\ntail\n") {
		t.Errorf("doc:\n%s", s)
	}
	if err := WriteUpgradeDoc(doc, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(doc); !strings.Contains(string(got), "Planned (not run).") {
		t.Errorf("doc without a walk:\n%s", got)
	}
	if err := os.WriteFile(doc, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteUpgradeDoc(doc, us); err == nil {
		t.Error("WriteUpgradeDoc without markers: want an error")
	}
	if got, _ := os.ReadFile(doc); string(got) != "no markers\n" {
		t.Errorf("a doc without markers was changed: %q", got)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), upgradeBegin) || !strings.Contains(string(data), upgradeEnd) {
		t.Error("docs/compatibility.md lacks the upgrade walk's markers")
	}
}
