package scale

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
)

// figure is one chart of the page: a value of every phase against N, a line per period.
type figure struct {
	Title, Unit string
	Value       func(Phase) float64
	// Bound, when set, draws the limit the value must stay under (per N).
	Bound func(Phase) float64
}

func figures() []figure {
	return []figure{
		{Title: "CSINode writes per node per minute", Unit: "writes/node/min", Value: func(p Phase) float64 { return p.WritesPerNodePerMinute }},
		{Title: "CSINode writes per real capacity change", Unit: "writes/change", Value: func(p Phase) float64 { return p.WritesPerTruthChange }},
		{Title: "API server requests per node per second", Unit: "req/node/s", Value: func(p Phase) float64 { return p.APIRequestsPerNodePerSecond }},
		{Title: "share of API requests that are capacity updates", Unit: "%", Value: func(p Phase) float64 { return 100 * p.CapacityShare }},
		{Title: "cloud capacity lookups per node per second (bound: 1 / min-interval)", Unit: "lookups/node/s",
			Value: func(p Phase) float64 { return p.LookupsPerSecond / float64(p.Nodes) },
			Bound: func(p Phase) float64 { return p.LookupBound / float64(p.Nodes) }},
		{Title: "convergence cloud change → CSINode change, p50", Unit: "s", Value: func(p Phase) float64 { return p.LagP50 }},
		{Title: "convergence cloud change → CSINode change, p99", Unit: "s", Value: func(p Phase) float64 { return p.LagP99 }},
		{Title: "stale-capacity attach failures per node", Unit: "failures/node", Value: func(p Phase) float64 { return float64(p.StaleAttachFailures) / float64(p.Nodes) }},
		{Title: "node plugin CPU per node", Unit: "% of a core", Value: func(p Phase) float64 { return p.PluginCPUPercent }},
		{Title: "node plugin RSS per node", Unit: "MiB", Value: func(p Phase) float64 { return p.PluginRSSMiB }},
		{Title: "pods stuck in ContainerCreating (must be 0)", Unit: "pods", Value: func(p Phase) float64 { return float64(p.PodsAtEnd.Stuck) }},
		{Title: "machine load (1-minute average at phase end)", Unit: "load", Value: func(p Phase) float64 { return p.LoadEnd }},
	}
}

// The chart geometry, in SVG user units.
const (
	chartW, chartH = 360.0, 200.0
	padL, padR     = 48.0, 12.0
	padT, padB     = 10.0, 30.0
)

// periodColors are the lines' colours, by period in ascending order.
var periodColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"}

type chartView struct {
	Title, Unit string
	SVG         template.HTML
}

// WriteHTML writes one self-contained page (inline SVG, no script, no network): a chart
// per figure against N, a line per period, and the table.
func WriteHTML(w io.Writer, r *Results) error {
	phases := r.phases()
	periodSet, nodeSet := map[int]bool{}, map[int]bool{}
	for _, p := range phases {
		periodSet[p.PeriodSeconds], nodeSet[p.Nodes] = true, true
	}
	periods, nodes := keys(periodSet), keys(nodeSet)
	var charts []chartView
	for _, f := range figures() {
		charts = append(charts, chartView{Title: f.Title, Unit: f.Unit, SVG: template.HTML(chartSVG(f, phases, periods, nodes))})
	}
	var table strings.Builder
	if err := WriteTable(&table, r); err != nil {
		return err
	}
	var legend []template.HTML
	for i, p := range periods {
		legend = append(legend, template.HTML(fmt.Sprintf(`<span style="color:%s">&#9632; period %d s</span>`, periodColors[i%len(periodColors)], p)))
	}
	return pageTmpl.Execute(w, map[string]any{
		"Results": r, "Charts": charts, "Legend": legend, "Table": table.String(),
		"Started": r.Started.UTC().Format("2006-01-02 15:04 MST"),
	})
}

func keys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// chartSVG draws f: x is N on a log scale (10, 30, 100 spread evenly), y linear from 0.
func chartSVG(f figure, phases []Phase, periods, nodes []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" xmlns="http://www.w3.org/2000/svg" font-size="10" font-family="sans-serif">`, chartW, chartH, chartW, chartH)
	if len(nodes) == 0 {
		b.WriteString(`<text x="10" y="20">no data</text></svg>`)
		return b.String()
	}
	ymax := 0.0
	for _, p := range phases {
		ymax = math.Max(ymax, f.Value(p))
		if f.Bound != nil {
			ymax = math.Max(ymax, f.Bound(p))
		}
	}
	if ymax <= 0 {
		ymax = 1
	}
	step := niceStep(ymax, 4)
	ymax = math.Ceil(ymax/step) * step
	lo, hi := math.Log(float64(nodes[0])), math.Log(float64(nodes[len(nodes)-1]))
	x := func(n int) float64 {
		if hi == lo {
			return padL + (chartW-padL-padR)/2
		}
		return padL + (math.Log(float64(n))-lo)/(hi-lo)*(chartW-padL-padR)
	}
	y := func(v float64) float64 { return chartH - padB - v/ymax*(chartH-padT-padB) }
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
			padL, chartW-padR, y(v), y(v), padL-4, y(v)+3, fmtTick(v))
	}
	for _, n := range nodes {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`, x(n), chartH-padB+14, n)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">nodes (N, log scale)</text>`, padL+(chartW-padL-padR)/2, chartH-4)
	if f.Bound != nil {
		var pts []string
		for _, n := range nodes {
			for _, p := range phases {
				if p.Nodes == n {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(n), y(f.Bound(p))))
					break
				}
			}
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#000" stroke-dasharray="4 3"/>`, strings.Join(pts, " "))
	}
	for i, period := range periods {
		color := periodColors[i%len(periodColors)]
		var pts []string
		for _, p := range phases {
			if p.PeriodSeconds != period {
				continue
			}
			px, py := x(p.Nodes), y(f.Value(p))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>N=%d, period %d s: %s %s</title></circle>`, px, py, color, p.Nodes, period, fmtTick(f.Value(p)), template.HTMLEscapeString(f.Unit))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, strings.Join(pts, " "), color)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// niceStep is a 1, 2 or 5 × 10^k step that cuts span into about n parts.
func niceStep(span float64, n int) float64 {
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

func fmtTick(v float64) string {
	s := fmt.Sprintf("%.3g", v)
	if strings.Contains(s, "e") {
		s = fmt.Sprintf("%.0f", v)
	}
	return s
}

var pageTmpl = template.Must(template.New("scale").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>fakecloud-csi at scale</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<style>body{font-family:sans-serif;margin:16px;max-width:1160px}.grid{display:flex;flex-wrap:wrap;gap:8px}
.chart{border:1px solid #ccc;padding:4px}.chart h3{font-size:12px;margin:2px 4px}pre{font-size:11px;white-space:pre-wrap}</style></head>
<body><h1>Capacity reporting at scale: local cluster of upstream v1.37.2 binaries, hollow kubelets</h1>
<p>run of {{.Started}} on {{.Results.Host.CPUs}} CPUs, {{printf "%.0f" .Results.Host.MemoryGB}} GiB; driver flags beyond the defaults: {{if .Results.DriverArgs}}{{range .Results.DriverArgs}}{{.}} {{end}}{{else}}none{{end}}
(--capacity-min-interval {{.Results.MinIntervalSeconds}} s). Each point is one phase: the churn script under a steady pod workload
(README, "Scale"). {{range .Legend}}{{.}} {{end}}<span>- - bound</span></p>
<div class="grid">{{range .Charts}}<div class="chart"><h3>{{.Title}} ({{.Unit}})</h3>{{.SVG}}</div>{{end}}</div>
<h2>Table</h2><pre>{{.Table}}</pre>
</body></html>
`))
