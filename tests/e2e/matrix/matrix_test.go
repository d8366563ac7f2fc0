package matrix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func cell(name string) Cell {
	return Cell{Name: name, ControlPlane: "v1.37.2", Kubelet: "v1.34.4", Attacher: "v4.13.0", PeriodSeconds: 10,
		Expect: Expect{Decision: "static"}}
}

// The committed cells file is valid, and its pinned attacher is the tools module's.
func TestCellsFile(t *testing.T) {
	cells, err := ReadCells("cells.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) == 0 {
		t.Fatal("no cells")
	}
	gomod, err := os.ReadFile(filepath.Join("..", "localcluster", "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "github.com/kubernetes-csi/external-attacher/v4 "+PinnedAttacher+" ") {
		t.Errorf("PinnedAttacher %s is not the tools module's external-attacher", PinnedAttacher)
	}
}

func TestCellValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Cell)
		wantErr string
	}{
		{name: "ok", edit: func(*Cell) {}},
		{name: "bad name", edit: func(c *Cell) { c.Name = "../x" }, wantErr: "cell name"},
		{name: "bad kubelet", edit: func(c *Cell) { c.Kubelet = "1.34" }, wantErr: "kubelet"},
		{name: "bad attacher", edit: func(c *Cell) { c.Attacher = "v3.1.0" }, wantErr: "attacher"},
		{name: "period 600", edit: func(c *Cell) { c.PeriodSeconds = 600 }},
		{name: "period unset", edit: func(c *Cell) { c.PeriodSeconds = 0 }},
		{name: "period below the API server's minimum", edit: func(c *Cell) { c.PeriodSeconds = 9 }, wantErr: "periodSeconds"},
		{name: "period change", edit: func(c *Cell) { c.PeriodChanges = []PeriodChange{{PeriodSeconds: 600}, {PeriodSeconds: 0}} }},
		{name: "bad period change", edit: func(c *Cell) { c.PeriodChanges = []PeriodChange{{PeriodSeconds: -10}} }, wantErr: "periodChanges[0]"},
		{name: "too many period changes", edit: func(c *Cell) { c.PeriodChanges = make([]PeriodChange, 5) }, wantErr: "at most 4"},
		{name: "decision after restart", edit: func(c *Cell) { c.Expect.DecisionAfterRestart = "later" }, wantErr: "decisionAfterRestart"},
		{name: "decision", edit: func(c *Cell) { c.Expect.Decision = "maybe" }, wantErr: "expect.decision"},
	} {
		c := cell("a")
		tc.edit(&c)
		err := c.Validate()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestSelect(t *testing.T) {
	cells := []Cell{cell("a"), cell("b"), cell("c")}
	got, err := Select(cells, []string{"c", "a"})
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
		t.Errorf("Select = %v, %v", got, err)
	}
	if _, err := Select(cells, []string{"x"}); err == nil {
		t.Error("Select(x): want an error")
	}
}

func TestJudge(t *testing.T) {
	f := 3.0
	changing := cell("c")
	changing.PeriodSeconds = 0
	changing.PeriodChanges = []PeriodChange{{PeriodSeconds: 600}, {PeriodSeconds: 10, ExpectCountFollows: true}}
	changing.Expect.DecisionAfterRestart = "dynamic"
	for _, tc := range []struct {
		name string
		row  Row
		want string
	}{
		{name: "static cell as expected", row: Row{Cell: cell("a"), Decision: "static", StuckContainerCreating: true}, want: "as expected"},
		{name: "wrong decision", row: Row{Cell: cell("a"), Decision: "dynamic", Reason: "supported"}, want: "unexpected: decision dynamic (supported), right is static"},
		{name: "replaced where not expected", row: Row{Cell: cell("a"), Decision: "static", PodFailedSeconds: &f, ReplacedSeconds: &f},
			want: "unexpected: pod failed and replaced: true, expected false"},
		{name: "a check failed", row: Row{Cell: cell("a"), Decision: "static", Errors: []string{"start the cluster: boom"}}, want: "error: start the cluster: boom"},
		{name: "period changes as expected", row: Row{Cell: changing, Decision: "static", DecisionAfterRestart: "dynamic",
			PeriodChanges: []PeriodChangeResult{{PeriodSeconds: 600}, {PeriodSeconds: 10, CountFollowed: true}}}, want: "as expected"},
		{name: "period change not followed", row: Row{Cell: changing, Decision: "static", DecisionAfterRestart: "dynamic",
			PeriodChanges: []PeriodChangeResult{{PeriodSeconds: 600}, {PeriodSeconds: 10}}}, want: "unexpected: period → 10 s: count follows: false, expected true"},
		{name: "period change not measured", row: Row{Cell: changing, Decision: "static", DecisionAfterRestart: "dynamic",
			PeriodChanges: []PeriodChangeResult{{PeriodSeconds: 600}}}, want: "unexpected: period → 10 s: not measured"},
		{name: "wrong decision after the restart", row: Row{Cell: changing, Decision: "static", DecisionAfterRestart: "static", ReasonAfterRestart: "period-unset",
			PeriodChanges: []PeriodChangeResult{{PeriodSeconds: 600}, {PeriodSeconds: 10, CountFollowed: true}}},
			want: "unexpected: decision after the restart static (period-unset), right is dynamic"},
	} {
		tc.row.judge()
		if tc.row.Outcome != tc.want {
			t.Errorf("%s: outcome %q, want %q", tc.name, tc.row.Outcome, tc.want)
		}
	}
}

// A cell without a row is planned, never passing; the latest row of a cell is shown.
func TestTableNeverMarksAnUnrunCell(t *testing.T) {
	f := 1.5
	old := Row{Cell: cell("a"), Date: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Decision: "dynamic", Outcome: "unexpected: old", Commit: "old"}
	newer := Row{Cell: cell("a"), Date: time.Date(2026, 12, 6, 9, 10, 0, 0, time.UTC), Decision: "static", Reason: "kubelet-gate-off-by-default",
		DecisionRight: true, StuckContainerCreating: true, RejectWindowSeconds: 240, ErrorCode8Seconds: &f, Outcome: "as expected", Commit: "abc1234"}
	table := Table([]Cell{cell("a"), cell("b")}, []Row{newer, old})
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines, want header, rule and 2 rows:\n%s", len(lines), table)
	}
	if a := lines[2]; !strings.Contains(a, "| a |") || !strings.Contains(a, "as expected") || !strings.Contains(a, "abc1234") ||
		!strings.Contains(a, "yes, 1.5 s") || !strings.Contains(a, "yes (after 240 s)") || strings.Contains(a, "old") {
		t.Errorf("row a: %s", a)
	}
	if b := lines[3]; !strings.Contains(b, "| b |") || !strings.Contains(b, "planned (not run)") || strings.Contains(b, "as expected") {
		t.Errorf("row b: %s", b)
	}
}

func TestResultsAndDoc(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results.json")
	if rows, err := ReadResults(results); err != nil || rows != nil {
		t.Fatalf("missing file = %v, %v", rows, err)
	}
	for _, o := range []string{"as expected", "unexpected: x"} {
		if err := AppendResult(results, Row{Cell: cell("a"), Outcome: o}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := ReadResults(results)
	if err != nil || len(rows) != 2 || rows[1].Outcome != "unexpected: x" {
		t.Fatalf("rows = %+v, %v", rows, err)
	}
	doc := filepath.Join(dir, "doc.md")
	if err := os.WriteFile(doc, []byte("# x\n\n"+beginMarker+"\nold table\n"+endMarker+"\ntail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDoc(doc, []Cell{cell("a")}, rows); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(doc)
	if s := string(got); strings.Contains(s, "old table") || !strings.HasSuffix(s, endMarker+"\ntail\n") || !strings.Contains(s, "| a |") {
		t.Errorf("doc:\n%s", s)
	}
	if err := os.WriteFile(doc, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDoc(doc, nil, rows); err == nil {
		t.Error("WriteDoc without markers: want an error")
	}
	if got, _ := os.ReadFile(doc); string(got) != "no markers\n" {
		t.Errorf("a doc without markers was changed: %q", got)
	}
}

// The repository's doc carries the markers WriteDoc needs.
func TestCompatibilityDocHasMarkers(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), beginMarker) || !strings.Contains(string(data), endMarker) {
		t.Error("docs/compatibility.md lacks the generated table's markers")
	}
}

// Which places each node in the cells of its minors; a labelled 1.34 node is the gate-on cell.
func TestWhich(t *testing.T) {
	off, on := cell("off"), cell("on")
	on.NodeLabels = ModeLabel + "=true"
	latest := cell("new")
	latest.Kubelet = "v1.37.2"
	ten := int64(10)
	o := Observed{ServerVersion: "v1.37.5-gke.1", Attacher: "v4.13.0", PeriodSeconds: &ten, Kubelets: map[string]ObservedKubelet{
		"a": {Version: "v1.34.1"}, "b": {Version: "v1.34.4", Labelled: true}, "c": {Version: "v1.37.0"}, "d": {Version: "v1.33.0"},
	}}
	got := Which(o, []Cell{off, on, latest})
	for node, want := range map[string]string{"a": "off", "b": "on", "c": "new", "d": ""} {
		if strings.Join(got[node], ",") != want {
			t.Errorf("node %s: cells %v, want %q", node, got[node], want)
		}
	}
	o.Attacher = "v4.12.0"
	if got := Which(o, []Cell{off}); len(got["a"]) != 0 {
		t.Errorf("another attacher minor matched: %v", got["a"])
	}
	o.Attacher = "v4.13.0"
	unset, changing := cell("unset"), cell("changing")
	unset.PeriodSeconds = 0
	changing.PeriodChanges = []PeriodChange{{PeriodSeconds: 600}}
	o.PeriodSeconds = nil
	if got := Which(o, []Cell{off, unset, changing}); strings.Join(got["a"], ",") != "unset" {
		t.Errorf("period unset: cells %v, want the unset one only", got["a"])
	}
}

// The table shows the period's course, each change's count check, the re-check and a changed
// decision after the restart.
func TestTablePeriodChanges(t *testing.T) {
	c := cell("p")
	c.PeriodSeconds = 0
	c.PeriodChanges = []PeriodChange{{PeriodSeconds: 10}}
	c.Expect.DecisionAfterRestart = "dynamic"
	c.APIServerGates = "MutableCSINodeAllocatableCount=false"
	f := 9.5
	r := Row{Cell: c, Date: time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC), Decision: "static", Reason: "period-unset", DecisionRight: true,
		PeriodChanges: []PeriodChangeResult{{PeriodSeconds: 10, CountFollowed: true, CountFollowSeconds: &f}},
		Recheck:       &Recheck{Supported: true, SecondsAfterChange: 240}, DecisionAfterRestart: "dynamic", ReasonAfterRestart: "supported"}
	line := strings.Split(strings.TrimSpace(Table([]Cell{c}, []Row{r})), "\n")[2]
	for _, want := range []string{"| unset → 10 s |", "| v1.37.2 (API server MutableCSINodeAllocatableCount=false) |", "after → 10 s: yes, 9.5 s", "re-check 240 s after the last change: supported true (at start false)",
		"after the restart: dynamic (supported), right"} {
		if !strings.Contains(line, want) {
			t.Errorf("row lacks %q: %s", want, line)
		}
	}
}
