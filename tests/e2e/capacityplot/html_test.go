package capacityplot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// element is a parsed tag with its attributes and text.
type element struct {
	name  string
	attrs map[string]string
	text  string
}

// parseHTML reads the page as XML (it is written well-formed), failing t on
// a syntax error, and returns every element in document order.
func parseHTML(t *testing.T, page []byte) []*element {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	var out, stack []*element
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("page is not well formed: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			e := &element{name: tk.Name.Local, attrs: map[string]string{}}
			for _, a := range tk.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out, stack = append(out, e), append(stack, e)
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tk)
			}
		}
	}
}

func TestWriteHTML(t *testing.T) {
	rec := synthRecording()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rec); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	els := parseHTML(t, page)

	// Self-contained: no scripts, no external references.
	for _, e := range els {
		if e.name == "script" || e.name == "link" || e.name == "img" || e.name == "iframe" {
			t.Errorf("page must be self-contained, found <%s>", e.name)
		}
		for k, v := range e.attrs {
			if k == "src" || k == "href" || (strings.Contains(v, "http") && k != "xmlns") {
				t.Errorf("external reference in <%s %s=%q>", e.name, k, v)
			}
		}
	}
	if bytes.Contains(page, []byte("url(")) || bytes.Contains(page, []byte("@import")) {
		t.Error("stylesheet references something outside the page")
	}
	if !bytes.Contains(page, []byte("synthetic &lt;run&gt;")) || !bytes.Contains(page, []byte("a note &amp; &lt;escape&gt;")) {
		t.Error("title and notes must be escaped")
	}

	// One chart per node, in node order, each with the three step lines and
	// one marker per count change of that node.
	var charts []string
	inChart := ""
	paths := map[string]map[string]string{}
	markers := map[string][]string{}
	for _, e := range els {
		switch {
		case e.name == "svg" && e.attrs["class"] == "node-chart":
			inChart = e.attrs["data-node"]
			charts = append(charts, inChart)
			paths[inChart] = map[string]string{}
		case e.name == "path" && inChart != "" && strings.HasPrefix(e.attrs["class"], "line "):
			paths[inChart][strings.TrimPrefix(e.attrs["class"], "line ")] = e.attrs["d"]
		case e.name == "circle" && inChart != "":
			markers[inChart] = append(markers[inChart], "")
		case e.name == "title" && inChart != "" && len(markers[inChart]) > 0:
			markers[inChart][len(markers[inChart])-1] = e.text
		case e.name == "table":
			inChart = ""
		}
	}
	if strings.Join(charts, ",") != "node-1,node-2" {
		t.Fatalf("expected charts node-1,node-2, got %v", charts)
	}
	for _, n := range charts {
		for _, class := range []string{"truth", "csinode", "scheduled", "attached"} {
			if paths[n][class] == "" {
				t.Errorf("chart %s: no %s line", n, class)
			}
		}
		if _, ok := paths[n]["plugin"]; ok {
			t.Errorf("chart %s: plugin line without plugin samples", n)
		}
	}
	// node-1's truth 7 → 5 → 7 is one move, two steps; its CSINode line
	// starts at 7 and changes twice.
	if got := strings.Count(paths["node-1"]["truth"], "V"); got != 3 { // one V per step, the attached-only step included
		t.Errorf("node-1 truth path: expected 3 vertical moves, got %d in %q", got, paths["node-1"]["truth"])
	}
	if got := strings.Count(paths["node-1"]["csinode"], "V"); got != 2 {
		t.Errorf("node-1 CSINode path: expected 2 vertical moves, got %d in %q", got, paths["node-1"]["csinode"])
	}
	if len(markers["node-1"]) != 2 || !strings.Contains(markers["node-1"][0], "lag 4s after InstancePatched (rev 11)") {
		t.Errorf("node-1 markers: expected 2 with the first lag 4s, got %q", markers["node-1"])
	}
	if len(markers["node-2"]) != 1 || !strings.Contains(markers["node-2"][0], "no matching cloud change") {
		t.Errorf("node-2 markers: expected 1 unmatched, got %q", markers["node-2"])
	}

	// The stats table has a row per node with its writes and lags.
	rows := map[string][]string{}
	var cur string
	for _, e := range els {
		if e.name == "tr" && e.attrs["data-node"] != "" {
			cur = e.attrs["data-node"]
		} else if e.name == "tr" {
			cur = ""
		}
		if e.name == "td" && cur != "" {
			rows[cur] = append(rows[cur], e.text)
		}
	}
	if got := strings.Join(rows["node-1"], "|"); got != "node-1|3|2|2|2|0|0|0|4s|4s|5s|5s" {
		t.Errorf("node-1 row: got %s", got)
	}
	if got := strings.Join(rows["node-2"], "|"); got != "node-2|1|1|0|0|1|0|0|0s|0s|0s|0s" {
		t.Errorf("node-2 row: got %s", got)
	}
}

func TestWriteHTMLPluginAndGaps(t *testing.T) {
	rec := synthRecording()
	rec.Truth = nil // no replay: truth comes from the samples
	for i := range rec.Samples {
		if i%2 == 0 {
			rec.Samples[i].Plugin = i64(4)
		}
		if i == 10 {
			rec.Samples[i].Cloud, rec.Samples[i].CloudErr = nil, "Unavailable"
		}
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rec); err != nil {
		t.Fatal(err)
	}
	els := parseHTML(t, buf.Bytes())
	var plugin, truth string
	for _, e := range els {
		if e.name == "svg" && e.attrs["data-node"] == "node-2" {
			break
		}
		switch e.attrs["class"] {
		case "line plugin":
			plugin = e.attrs["d"]
		case "line truth":
			truth = e.attrs["d"]
		}
	}
	if plugin == "" {
		t.Error("plugin samples must draw a plugin line")
	}
	if strings.Count(truth, "M") != 2 {
		t.Errorf("a failed cloud sample must lift the pen once, got %q", truth)
	}
}

func TestStepPath(t *testing.T) {
	x := func(tm time.Time) float64 { return tm.Sub(t0).Seconds() }
	y := func(v int64) float64 { return float64(100 - v) }
	tests := []struct {
		name string
		pts  []point
		want string
	}{
		{"empty", nil, ""},
		{"one value to the end", []point{{at(0), i64(3)}}, "M0 97 H10"},
		{"steps", []point{{at(0), i64(3)}, {at(4), i64(5)}}, "M0 97 H4 V95 H10"},
		{"gap", []point{{at(0), i64(3)}, {at(2), nil}, {at(6), i64(1)}}, "M0 97 H2M6 99 H10"},
		{"starts unknown", []point{{at(0), nil}, {at(5), i64(2)}}, "M5 98 H10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := stepPath(tc.pts, at(10), x, y); got != tc.want {
				t.Errorf("expected %q, got %q", tc.want, got)
			}
		})
	}
}

func TestWriteSummary(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSummary(&buf, synthRecording()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"driver disk.fakecloud.dev",
		"+14s      node-1 7 -> 5  lag 4s after InstancePatched rev 11",
		"+35s      node-1 5 -> 7  lag 5s after InstancePatched rev 13",
		"+40s      node-2 3 -> 1  no matching cloud change",
		"note: a note & <escape>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "node-1" {
			row = f
			break
		}
	}
	if strings.Join(row, " ") != "node-1 3 2 2 2 0 0 0 4s 4s 5s 5s" {
		t.Errorf("node-1 row: got %q", row)
	}
}

// TestWriteHTMLLegendAndAxes checks what a reader needs to read the charts: a legend naming
// every line (the plugin's too, and why it is missing when the run did not sample it), the
// axis labels of every chart, and a caption that explains the red rows.
func TestWriteHTMLLegendAndAxes(t *testing.T) {
	tests := []struct {
		name string
		// edit changes the synthetic recording before it is drawn.
		edit func(rec *Recording)
		// plugin is the class the plugin's legend item has; caption a text the caption has.
		plugin, caption string
	}{
		{"plugin not sampled, no stale write", func(*Recording) {}, "item absent", "(none in this run)"},
		{"plugin sampled, one stale write", func(rec *Recording) {
			for i := range rec.Samples {
				rec.Samples[i].Plugin = i64(5)
			}
			// node-1's truth goes back to 5 at +33 s: its count change to 7 at +35 s is stale.
			rec.Truth["node-1"] = append(rec.Truth["node-1"], step(33, 14, "InstancePatched", 5, 1))
			rec.computeLags()
		}, "item", "stale CSINode writes"},
	}
	wantLegend := []struct{ line, label string }{
		{"truth", "cloud truth: max(1, min(limit − out-of-band, attached + quota share))"},
		{"plugin", "reported by the node plugin (NodeGetInfo max_volumes_per_node"},
		{"csinode", "CSINode allocatable.count"},
		{"write", "a CSINode count change"},
		{"scheduled", "volumes scheduled"},
		{"attached", "volumes attached in the cloud"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := synthRecording()
			tc.edit(rec)
			var buf bytes.Buffer
			if err := WriteHTML(&buf, rec); err != nil {
				t.Fatal(err)
			}
			els := parseHTML(t, buf.Bytes())
			var legend []*element
			ylabels, xlabels, stale := 0, 0, 0
			caption := ""
			for _, e := range els {
				switch {
				case e.name == "span" && strings.HasPrefix(e.attrs["class"], "item"):
					legend = append(legend, e)
				case e.name == "text" && e.attrs["class"] == "ylabel" && e.text == "volume slots":
					ylabels++
				case e.name == "text" && e.attrs["class"] == "xlabel" && e.text == "time since start":
					xlabels++
				case e.name == "p" && e.attrs["class"] == "caption":
					caption = e.text
				case e.name == "tr" && e.attrs["class"] == "stale":
					stale++
				}
			}
			if len(legend) != len(wantLegend) {
				t.Fatalf("legend: expected %d items, got %d", len(wantLegend), len(legend))
			}
			for i, w := range wantLegend {
				if legend[i].attrs["data-line"] != w.line || !strings.Contains(legend[i].text, w.label) {
					t.Errorf("legend item %d: expected line %q with %q, got %q %q", i, w.line, w.label, legend[i].attrs["data-line"], legend[i].text)
				}
			}
			if got := legend[1].attrs["class"]; got != tc.plugin {
				t.Errorf("plugin legend item: expected class %q, got %q", tc.plugin, got)
			}
			if ylabels != len(rec.Nodes) || xlabels != len(rec.Nodes) {
				t.Errorf("expected a y label \"volume slots\" and an x label per chart (%d), got %d and %d", len(rec.Nodes), ylabels, xlabels)
			}
			// The caption's "Red rows" is a span of its own: the paragraph's text is the rest.
			if !strings.Contains(caption, "y: volume slots per node") || !strings.Contains(caption, tc.caption) {
				t.Errorf("caption %q lacks the y axis or %q", caption, tc.caption)
			}
			if want := map[bool]int{false: 0, true: 1}[tc.caption == "stale CSINode writes"]; stale != want {
				t.Errorf("expected %d red rows, got %d", want, stale)
			}
		})
	}
}
