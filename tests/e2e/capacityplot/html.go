package capacityplot

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

// Chart geometry in SVG user units.
const (
	chartW, chartH                     = 372, 204
	marginL, marginR, marginT, marginB = 40, 12, 10, 40
)

// series are the lines of one chart, back to front; Class picks the style.
type series struct {
	Class, Label string
	Points       []point
}

type point struct {
	At    time.Time
	Value *int64
}

type pathView struct{ Class, D string }

type markerView struct {
	X, Y  float64
	Title string
}

type tickView struct {
	Pos   float64
	Label string
}

type chartView struct {
	Node, InstanceID string
	W, H             int
	X0, X1, Y0, Y1   float64
	// YT is the lower end of the x tick marks; YMid the middle of the y axis (its label),
	// XMid the middle of the x axis and XLabelY the baseline of its label.
	YT, YMid, XMid, XLabelY float64
	XTicks, YTicks          []tickView
	Paths                   []pathView
	Markers                 []markerView
}

type changeView struct {
	At, Node, From, To, Cloud, Lag string
	Stale                          bool
}

// legendItem is one entry of the legend: the line's class (its style in the charts), or a
// marker, and what it shows.
type legendItem struct {
	Class, Label string
	// Marker draws the count-change dot instead of a line.
	Marker bool
	// Absent says the line is not in the charts (the run did not sample it) and why.
	Absent string
}

type pageView struct {
	Title, Driver, Start, End, Duration, Interval string
	Legend                                        []legendItem
	// AnyStale says some count change was stale (a red row).
	AnyStale bool
	Charts   []chartView
	Stats    []NodeStats
	Changes  []changeView
	Notes    []string
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"dur": fmtDur,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/>
<title>{{.Title}}</title>
<style>
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: #555; margin-bottom: 8px; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 16px; }
.legend .item { white-space: nowrap; }
.legend .absent { color: #888; } .legend .absent svg { opacity: .45; }
.legend svg { vertical-align: middle; }
.caption { color: #444; margin: 4px 0 8px; }
.stale-key, tr.stale td { color: #b00; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; }
.chart { border: 1px solid #ddd; padding: 4px; }
.chart h3 { font-size: 13px; margin: 0 0 2px; }
svg text { font: 10px sans-serif; fill: #555; }
.axis { stroke: #999; stroke-width: 1; fill: none; }
.grid { stroke: #eee; stroke-width: 1; }
path.line { fill: none; stroke-linejoin: round; }
.truth { stroke: #1f77b4; stroke-width: 2.5; }
.csinode { stroke: #ff7f0e; stroke-width: 2; stroke-dasharray: 6 3; }
.plugin { stroke: #9467bd; stroke-width: 1.5; stroke-dasharray: 2 2; }
.scheduled { stroke: #2ca02c; stroke-width: 2; }
.attached { stroke: #7f7f7f; stroke-width: 1; stroke-dasharray: 1 3; }
circle.write { fill: #ff7f0e; stroke: #fff; stroke-width: 1; }
table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
</style></head>
<body>
<h1>{{.Title}}</h1>
<div class="meta">driver {{.Driver}} · {{.Start}} → {{.End}} ({{.Duration}}) · sample every {{.Interval}}</div>
<div class="legend">{{range .Legend}}<span class="item{{if .Absent}} absent{{end}}" data-line="{{.Class}}"><svg width="26" height="10">{{if .Marker}}<circle class="write" cx="13" cy="5" r="3.5"/>{{else}}<path class="line {{.Class}}" d="M1 5 H25"/>{{end}}</svg> {{.Label}}{{if .Absent}} <em>({{.Absent}})</em>{{end}}</span>{{end}}</div>
<p class="caption">y: volume slots per node (one slot holds one attached volume); x: time since the start of the run.
<span class="stale-key">Red rows</span> in the count-change table are stale CSINode writes: the cloud truth had already moved on when the count landed{{if not .AnyStale}} (none in this run){{end}}.</p>
<div class="charts">
{{range .Charts}}<div class="chart"><h3>{{.Node}}{{if ne .InstanceID .Node}} (instance {{.InstanceID}}){{end}}</h3>
<svg xmlns="http://www.w3.org/2000/svg" class="node-chart" data-node="{{.Node}}" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}">
{{$c := .}}{{range .YTicks}}<line class="grid" x1="{{$c.X0}}" x2="{{$c.X1}}" y1="{{.Pos}}" y2="{{.Pos}}"/><text x="{{$c.X0}}" dx="-4" y="{{.Pos}}" dy="3" text-anchor="end">{{.Label}}</text>
{{end}}{{range .XTicks}}<line class="axis" x1="{{.Pos}}" x2="{{.Pos}}" y1="{{$c.Y0}}" y2="{{$c.YT}}"/><text x="{{.Pos}}" y="{{$c.Y0}}" dy="13" text-anchor="middle">{{.Label}}</text>
{{end}}<path class="axis" d="M{{.X0}} {{.Y1}} V{{.Y0}} H{{.X1}}"/><text class="ylabel" x="8" y="{{.YMid}}" transform="rotate(-90 8 {{.YMid}})" text-anchor="middle">volume slots</text><text class="xlabel" x="{{.XMid}}" y="{{.XLabelY}}" text-anchor="middle">time since start</text>
{{range .Paths}}<path class="line {{.Class}}" d="{{.D}}"/>
{{end}}{{range .Markers}}<circle class="write" cx="{{.X}}" cy="{{.Y}}" r="3.5"><title>{{.Title}}</title></circle>
{{end}}</svg></div>
{{end}}</div>
<h2>CSINode writes and update lag per node</h2>
<table class="stats"><tr><th>node</th><th>CSINode writes</th><th>count changes</th><th>cloud truth changes</th><th>matched</th><th>unmatched</th><th>stale</th><th>missed</th><th>lag min</th><th>median</th><th>p90</th><th>max</th></tr>
{{range .Stats}}<tr data-node="{{.Node}}"><td>{{.Node}}</td><td>{{.Writes}}</td><td>{{.CountChanges}}</td><td>{{.TruthChanges}}</td><td>{{.Matched}}</td><td>{{.Unmatched}}</td><td>{{.Stale}}</td><td>{{.Missed}}</td><td>{{dur .LagMin}}</td><td>{{dur .LagMedian}}</td><td>{{dur .LagP90}}</td><td>{{dur .LagMax}}</td></tr>
{{end}}</table>
<p class="meta">lag: cloud event that moved the truth to the new count → CSINode change seen by the watch. unmatched: no cloud change to that value during the run (driver floor, ramp, last known good, or a value the truth already had). stale: the truth had moved on when the write landed. missed: truth changes no CSINode change reflected.</p>
{{if .Changes}}<h2>CSINode count changes</h2>
<p class="meta"><span class="stale-key">Rows in red</span> are stale writes: the cloud truth had already moved on when the count landed. "—" in cloud change: no cloud event moved the truth to that value (a floor, a ramp step, last known good).</p>
<table class="changes"><tr><th>at</th><th>node</th><th>from</th><th>to</th><th>cloud change</th><th>lag</th></tr>
{{range .Changes}}<tr{{if .Stale}} class="stale"{{end}}><td>{{.At}}</td><td>{{.Node}}</td><td>{{.From}}</td><td>{{.To}}</td><td>{{.Cloud}}</td><td>{{.Lag}}</td></tr>
{{end}}</table>{{end}}
{{if .Notes}}<h2>Notes</h2><ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
</body></html>
`))

// WriteHTML writes rec as one self-contained HTML page: a step chart per
// node (cloud truth, CSINode count, node plugin report when sampled,
// volumes scheduled, cloud attached), the write and lag table, every count
// change, and the notes. No scripts, stylesheets or images are referenced.
func WriteHTML(w io.Writer, rec *Recording) error {
	v := pageView{Title: rec.Title, Driver: rec.Driver, Start: rec.Start.Format(time.RFC3339), End: rec.End.Format(time.RFC3339),
		Duration: fmtDur(rec.End.Sub(rec.Start)), Interval: fmtDur(rec.Interval), Stats: rec.Stats(), Notes: rec.Notes}
	if v.Title == "" {
		v.Title = "CSINode capacity over time"
	}
	hasPlugin := false
	for _, s := range rec.Samples {
		hasPlugin = hasPlugin || s.Plugin != nil
	}
	v.Legend = legend(hasPlugin)
	for _, n := range rec.Nodes {
		v.Charts = append(v.Charts, buildChart(rec, n, hasPlugin))
	}
	for _, n := range rec.Nodes {
		for _, l := range rec.Lags[n] {
			cv := changeView{At: "+" + fmtDur(l.Change.At.Sub(rec.Start)), Node: n, From: fmtCount(l.Change.Old), To: fmtCount(l.Change.New), Lag: "—", Cloud: "—", Stale: l.Stale}
			if l.Matched {
				cv.Lag = fmtDur(l.Lag)
				cv.Cloud = fmt.Sprintf("%s rev %d at +%s", l.Cloud.Cause, l.Cloud.Revision, fmtDur(l.Cloud.At.Sub(rec.Start)))
			}
			v.Changes = append(v.Changes, cv)
			v.AnyStale = v.AnyStale || l.Stale
		}
	}
	return pageTmpl.Execute(w, v)
}

// legend names every line of the charts, the order a reader follows a change in: the cloud's
// truth, the plugin's report of it, the kubelet's copy into CSINode, then what the scheduler
// placed and the cloud attached. The plugin's line is named even when the run did not sample
// it (withPlugin false), with the reason, so that its absence is not mistaken for a value.
func legend(withPlugin bool) []legendItem {
	plugin := legendItem{Class: "plugin", Label: "reported by the node plugin (NodeGetInfo max_volumes_per_node, its /debug/capacity)"}
	if !withPlugin {
		plugin.Absent = "not sampled in this run: no --plugin-url"
	}
	return []legendItem{
		{Class: "truth", Label: "cloud truth: max(1, min(limit − out-of-band, attached + quota share))"},
		plugin,
		{Class: "csinode", Label: "CSINode allocatable.count (the kubelet's copy; the scheduler counts against it)"},
		{Class: "write", Label: "a CSINode count change (hover: its lag)", Marker: true},
		{Class: "scheduled", Label: "volumes scheduled (this driver's volumes of the node's live pods)"},
		{Class: "attached", Label: "volumes attached in the cloud"},
	}
}

// nodeSeries builds the step series of node n.
func nodeSeries(rec *Recording, n string, withPlugin bool) []series {
	truth := series{Class: "truth", Label: "cloud truth"}
	attached := series{Class: "attached", Label: "cloud attached"}
	if steps := rec.Truth[n]; len(steps) > 0 {
		for _, s := range steps {
			t, a := s.Truth, int64(s.Attached)
			truth.Points = append(truth.Points, point{s.At, &t})
			attached.Points = append(attached.Points, point{s.At, &a})
		}
	} else {
		for _, s := range rec.Samples {
			if s.Node != n {
				continue
			}
			if s.Cloud == nil {
				truth.Points = append(truth.Points, point{s.At, nil})
				attached.Points = append(attached.Points, point{s.At, nil})
				continue
			}
			t, a := s.Truth, int64(s.Cloud.Attached)
			truth.Points = append(truth.Points, point{s.At, &t})
			attached.Points = append(attached.Points, point{s.At, &a})
		}
	}
	csinode := series{Class: "csinode", Label: "CSINode count", Points: []point{{rec.Start, rec.Initial[n]}}}
	for _, c := range rec.Changes {
		if c.Node == n {
			csinode.Points = append(csinode.Points, point{c.At, c.New})
		}
	}
	scheduled := series{Class: "scheduled", Label: "volumes scheduled"}
	plugin := series{Class: "plugin", Label: "node plugin reported"}
	for _, s := range rec.Samples {
		if s.Node != n {
			continue
		}
		sc := int64(s.Scheduled)
		scheduled.Points = append(scheduled.Points, point{s.At, &sc})
		plugin.Points = append(plugin.Points, point{s.At, s.Plugin})
	}
	out := []series{attached, scheduled, truth, csinode}
	if withPlugin {
		out = append(out, plugin)
	}
	return out
}

func buildChart(rec *Recording, n string, withPlugin bool) chartView {
	c := chartView{Node: n, InstanceID: rec.NodeIDs[n], W: chartW, H: chartH,
		X0: marginL, X1: chartW - marginR, Y0: chartH - marginB, Y1: marginT, YT: chartH - marginB + 4, YMid: (chartH - marginB + marginT) / 2,
		XMid: (marginL + chartW - marginR) / 2, XLabelY: chartH - 4}
	if c.InstanceID == "" {
		c.InstanceID = n
	}
	ss := nodeSeries(rec, n, withPlugin)
	ymax := int64(4)
	for _, s := range ss {
		for _, p := range s.Points {
			if p.Value != nil {
				ymax = max(ymax, *p.Value+1)
			}
		}
	}
	span := rec.End.Sub(rec.Start)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		f := float64(t.Sub(rec.Start)) / float64(span)
		return round1(c.X0 + min(max(f, 0), 1)*(c.X1-c.X0))
	}
	y := func(v int64) float64 { return round1(c.Y0 - float64(v)/float64(ymax)*(c.Y0-c.Y1)) }
	ystep := niceStep(float64(ymax), 6)
	for v := int64(0); v <= ymax; v += max(int64(ystep), 1) {
		c.YTicks = append(c.YTicks, tickView{Pos: y(v), Label: strconv.FormatInt(v, 10)})
	}
	xstep := time.Duration(niceStep(span.Seconds(), 8) * float64(time.Second))
	for d := time.Duration(0); d <= span; d += xstep {
		c.XTicks = append(c.XTicks, tickView{Pos: x(rec.Start.Add(d)), Label: fmtDur(d)})
	}
	for _, s := range ss {
		if d := stepPath(s.Points, rec.End, x, y); d != "" {
			c.Paths = append(c.Paths, pathView{Class: s.Class, D: d})
		}
	}
	for _, l := range rec.Lags[n] {
		if l.Change.New == nil {
			continue
		}
		title := fmt.Sprintf("+%s CSINode %s → %s", fmtDur(l.Change.At.Sub(rec.Start)), fmtCount(l.Change.Old), fmtCount(l.Change.New))
		if l.Matched {
			title += fmt.Sprintf(", lag %s after %s (rev %d)", fmtDur(l.Lag), l.Cloud.Cause, l.Cloud.Revision)
		} else {
			title += ", no matching cloud change"
		}
		if l.Stale {
			title += ", stale when written"
		}
		c.Markers = append(c.Markers, markerView{X: x(l.Change.At), Y: y(*l.Change.New), Title: title})
	}
	return c
}

// stepPath draws points as a step function until end; a nil value lifts
// the pen.
func stepPath(pts []point, end time.Time, x func(time.Time) float64, y func(int64) float64) string {
	var b strings.Builder
	var cur *int64
	for _, p := range pts {
		switch {
		case p.Value == nil:
		case cur == nil:
			fmt.Fprintf(&b, "M%g %g", x(p.At), y(*p.Value))
		default:
			fmt.Fprintf(&b, " H%g V%g", x(p.At), y(*p.Value))
		}
		if cur != nil && p.Value == nil {
			fmt.Fprintf(&b, " H%g", x(p.At))
		}
		cur = p.Value
	}
	if cur != nil {
		fmt.Fprintf(&b, " H%g", x(end))
	}
	return b.String()
}

// niceStep is a 1-2-5 step that splits span into at most n parts.
func niceStep(span float64, n int) float64 {
	for _, base := range []float64{1, 10, 100, 1000, 10000} {
		for _, m := range []float64{1, 2, 5} {
			if s := base * m; span/s <= float64(n) {
				return s
			}
		}
	}
	return span
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func fmtCount(c *int64) string {
	if c == nil {
		return "none"
	}
	return strconv.FormatInt(*c, 10)
}

// fmtDur prints d rounded to 0.1 s (ms below one second).
func fmtDur(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
