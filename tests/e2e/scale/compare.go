package scale

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// FleetSource is the Source of the rows a measured phase gives (FleetRow).
const FleetSource = "make scale"

// FleetRow is one run in bench/policy's comparison format (its -fleet-json writes one per
// line): per-node and per-second figures under the same JSON names, so that a simulated
// fleet and a measured cluster compare row by row at the same nodes and periodSeconds.
// Source says which ("bench/policy", FleetSource); Scenario and QuotaShare are the
// simulation's (a measured phase is the churn script, share "none").
type FleetRow struct {
	Source        string `json:"source"`
	Scenario      string `json:"scenario"`
	QuotaShare    string `json:"quotaShare"`
	Nodes         int    `json:"nodes"`
	PeriodSeconds int    `json:"periodSeconds"`
	// Seconds is the time the row covers; CSINodeWrites and CapacityChanges (changes of
	// a node's true count, summed over the nodes) are counted over it.
	Seconds         float64 `json:"seconds"`
	CSINodeWrites   int     `json:"csinodeWrites"`
	CapacityChanges int     `json:"capacityChanges"`
	AttachFailures  int     `json:"staleCapacityAttachFailures"`

	WritesPerNodeHour    float64 `json:"csinodeWritesPerNodeHour"`
	LookupsPerNodeMinute float64 `json:"cloudLookupsPerNodeMinute"`
	WritesPerSecond      float64 `json:"csinodeWritesPerSecond"`
	LookupsPerSecond     float64 `json:"cloudLookupsPerSecond"`
	WritesPerChange      float64 `json:"csinodeWritesPerCapacityChange"`
}

// FleetRow is p in the comparison format.
func (p Phase) FleetRow() FleetRow {
	r := FleetRow{Source: FleetSource, Scenario: "scale-churn", QuotaShare: "none", Nodes: p.Nodes, PeriodSeconds: p.PeriodSeconds,
		Seconds: p.Seconds, CSINodeWrites: p.CSINodeWrites, CapacityChanges: p.TruthChanges, AttachFailures: p.StaleAttachFailures,
		WritesPerNodeHour: 60 * p.WritesPerNodePerMinute, WritesPerSecond: p.WritesPerSecond, LookupsPerSecond: p.LookupsPerSecond,
		WritesPerChange: p.WritesPerTruthChange}
	if p.Nodes > 0 {
		r.LookupsPerNodeMinute = 60 * p.LookupsPerSecond / float64(p.Nodes)
	}
	return r
}

// WriteFleetRows writes every phase of r as a FleetRow, one JSON object per line, by node
// count then period.
func WriteFleetRows(w io.Writer, r *Results) error {
	enc := json.NewEncoder(w)
	for _, p := range r.phases() {
		if err := enc.Encode(p.FleetRow()); err != nil {
			return err
		}
	}
	return nil
}

// maxFleetRowBytes bounds one line of a -fleet-json file (a row with its bursts is under
// 2 KiB).
const maxFleetRowBytes = 1 << 20

// ReadFleetRows reads a -fleet-json file: one FleetRow per line (fields it does not know
// are ignored; blank lines skipped).
func ReadFleetRows(r io.Reader) ([]FleetRow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxFleetRowBytes)
	var rows []FleetRow
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var row FleetRow
		if err := json.Unmarshal([]byte(text), &row); err != nil {
			return nil, fmt.Errorf("fleet rows, line %d: %w", line, err)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("fleet rows: %w", err)
	}
	return rows, nil
}

// ReadFleetFile is ReadFleetRows of the file at path.
func ReadFleetFile(path string) ([]FleetRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fleet rows: %w", err)
	}
	defer f.Close()
	rows, err := ReadFleetRows(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// Comparison is one measured phase beside the simulated rows of the same nodes and
// periodSeconds.
type Comparison struct {
	Measured  FleetRow
	Simulated []FleetRow
}

// Compare joins r's phases with sim's rows at the same nodes and periodSeconds; a phase no
// row matches is left out. Rows come by node count, period, then the simulated scenario and
// share.
func Compare(r *Results, sim []FleetRow) []Comparison {
	var out []Comparison
	for _, p := range r.phases() {
		c := Comparison{Measured: p.FleetRow()}
		for _, s := range sim {
			if s.Nodes == p.Nodes && s.PeriodSeconds == p.PeriodSeconds {
				c.Simulated = append(c.Simulated, s)
			}
		}
		if len(c.Simulated) == 0 {
			continue
		}
		sort.SliceStable(c.Simulated, func(i, j int) bool {
			a, b := c.Simulated[i], c.Simulated[j]
			if a.Scenario != b.Scenario {
				return a.Scenario < b.Scenario
			}
			return a.QuotaShare < b.QuotaShare
		})
		out = append(out, c)
	}
	return out
}

// CompareFile is the file WriteComparison's table goes to beside the results.
const CompareFile = "scale-vs-fleet.md"

// WriteComparison writes cs as a Markdown table: for each node count and period the
// measured row, then the simulated ones.
func WriteComparison(w io.Writer, cs []Comparison) error {
	var b strings.Builder
	b.WriteString("| N | period | source | scenario (share) | writes per node-hour | writes per capacity change | lookups per node-min | writes/s | lookups/s |\n")
	b.WriteString("|---:|---:|---|---|---:|---:|---:|---:|---:|\n")
	row := func(r FleetRow) {
		fmt.Fprintf(&b, "| %d | %d s | %s | %s (%s) | %.2f | %.2f | %.2f | %.3f | %.2f |\n", r.Nodes, r.PeriodSeconds, r.Source, r.Scenario, r.QuotaShare,
			r.WritesPerNodeHour, r.WritesPerChange, r.LookupsPerNodeMinute, r.WritesPerSecond, r.LookupsPerSecond)
	}
	for _, c := range cs {
		row(c.Measured)
		for _, s := range c.Simulated {
			row(s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
