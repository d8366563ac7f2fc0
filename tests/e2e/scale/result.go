package scale

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Results are one Run: the machine, and a Phase per node count and period.
type Results struct {
	// Started is when the run began; Host describes the machine.
	Started time.Time `json:"started"`
	Host    Host      `json:"host"`
	// DriverArgs are the driver's flags beyond its defaults; MinIntervalSeconds its
	// --capacity-min-interval.
	DriverArgs         []string  `json:"driverArgs"`
	MinIntervalSeconds float64   `json:"minIntervalSeconds"`
	Clusters           []Cluster `json:"clusters"`
	// Stopped says where and why the run stopped early ("" when it ran through).
	Stopped string `json:"stopped,omitempty"`
}

// Host is the machine a run measured on.
type Host struct {
	CPUs     int     `json:"cpus"`
	MemoryGB float64 `json:"memoryGB"`
}

// Cluster is one node count: how long the cluster took to start or to grow to it, its
// phases, and the drain at its end.
type Cluster struct {
	Nodes int `json:"nodes"`
	// GrownFrom is the node count the cluster had before it grew to Nodes; 0 when it
	// started with Nodes. StartSeconds is the time to start, or to grow.
	GrownFrom    int     `json:"grownFrom,omitempty"`
	StartSeconds float64 `json:"startSeconds"`
	// LoadAtStart is the 1-minute load average once the cluster was up.
	LoadAtStart float64 `json:"loadAtStart"`
	Phases      []Phase `json:"phases"`
	// PodsCreated by the workload over all phases; WorkloadErrors its failed creates
	// and deletes (LastWorkloadError the last).
	PodsCreated       int    `json:"podsCreated"`
	WorkloadErrors    int    `json:"workloadErrors"`
	LastWorkloadError string `json:"lastWorkloadError,omitempty"`
	// AfterDrain are the pods by state once the workload stopped and Drain passed (or
	// every pod ran); DrainSeconds how long that took.
	AfterDrain   PodCounts `json:"afterDrain"`
	DrainSeconds float64   `json:"drainSeconds"`
	// Error is what ended this cluster early.
	Error string `json:"error,omitempty"`
}

// Phase is one node count at one period: every figure of issue 16's table.
type Phase struct {
	Nodes         int     `json:"nodes"`
	PeriodSeconds int     `json:"periodSeconds"`
	Seconds       float64 `json:"seconds"`
	// LoadStart and LoadEnd are the 1-minute load averages at its start and end.
	LoadStart float64 `json:"loadStart"`
	LoadEnd   float64 `json:"loadEnd"`

	// CSINodeWrites counts CSINode updates seen by a watch; TruthChanges the changes of
	// the nodes' cloud truth (replayed from the audit log); CountChanges the writes that
	// moved the driver's allocatable.count.
	CSINodeWrites int `json:"csiNodeWrites"`
	CountChanges  int `json:"countChanges"`
	TruthChanges  int `json:"truthChanges"`
	// WritesPerSecond = CSINodeWrites / Seconds; WritesPerTruthChange = CSINodeWrites /
	// TruthChanges (below 1: noise and short-lived changes damped).
	WritesPerSecond        float64 `json:"writesPerSecond"`
	WritesPerNodePerMinute float64 `json:"writesPerNodePerMinute"`
	WritesPerTruthChange   float64 `json:"writesPerTruthChange"`

	// Matched count changes tied to the cloud change they reflect; Missed truth changes
	// never reflected (damped, or still pending at the end); Stale changes out of date
	// when written. Lag* are over the matched changes, seconds; LagDecrease* over those
	// that lowered the count (the direction that prevents attach failures).
	Matched          int     `json:"matched"`
	Missed           int     `json:"missed"`
	Stale            int     `json:"stale"`
	LagP50           float64 `json:"lagP50"`
	LagP99           float64 `json:"lagP99"`
	LagMax           float64 `json:"lagMax"`
	LagDecreaseP50   float64 `json:"lagDecreaseP50"`
	LagDecreaseMax   float64 `json:"lagDecreaseMax"`
	LagDecreaseCount int     `json:"lagDecreaseCount"`

	// APIRequestsPerSecond is the API server's request rate (apiserver_request_total),
	// by "VERB resource" in APIRequests; CapacityRequestsPerSecond the part that is the
	// kubelets' capacity updates (GET and PUT csinodes), CapacityShare its fraction.
	APIRequestsPerSecond        float64                `json:"apiRequestsPerSecond"`
	APIRequestsPerNodePerSecond float64                `json:"apiRequestsPerNodePerSecond"`
	APIRequests                 map[RequestKey]float64 `json:"apiRequests"`
	CapacityRequestsPerSecond   float64                `json:"capacityRequestsPerSecond"`
	CapacityShare               float64                `json:"capacityShare"`

	// LookupsPerSecond are the node plugins' cloud capacity lookups
	// (fakecloud_csi_capacity_lookups_total, after caching); LookupBound = N /
	// --capacity-min-interval, the most they may make; CloudGetCapacityPerSecond the fake
	// cloud's getCapacity requests, the observer's own baseline reads included.
	LookupsPerSecond          float64 `json:"lookupsPerSecond"`
	LookupBound               float64 `json:"lookupBound"`
	CloudGetCapacityPerSecond float64 `json:"cloudGetCapacityPerSecond"`

	// StaleAttachFailures are VolumeAttachments first failing with RESOURCE_EXHAUSTED in
	// the phase: the count had promised a slot the cloud did not have.
	StaleAttachFailures int `json:"staleAttachFailures"`
	// PodsAtEnd are the workload's pods by state when the phase ended.
	PodsAtEnd PodCounts `json:"podsAtEnd"`

	// Plugin* are per node plugin: CPU as a percentage of one core over the phase, RSS at
	// its end (mean and max, MiB). Kubelet* the same for the hollow kubelets, APIServerCPU
	// and EtcdCPU whole cores used.
	PluginCPUPercent  float64 `json:"pluginCPUPercent"`
	PluginRSSMiB      float64 `json:"pluginRSSMiB"`
	PluginRSSMaxMiB   float64 `json:"pluginRSSMaxMiB"`
	KubeletCPUPercent float64 `json:"kubeletCPUPercent"`
	KubeletRSSMiB     float64 `json:"kubeletRSSMiB"`
	APIServerCores    float64 `json:"apiServerCores"`
	EtcdCores         float64 `json:"etcdCores"`
	APIServerRSSMiB   float64 `json:"apiServerRSSMiB"`

	// Notes are problems worth reading next to the numbers (replay notes, failed reads).
	Notes []string `json:"notes,omitempty"`
}

// File names WriteFiles writes.
const (
	ResultsFile = "scale-results.json"
	TableFile   = "scale-table.md"
	PlotFile    = "scale-plot.html"
	// FleetFile holds every phase as a FleetRow, one per line: bench/policy's -fleet-json
	// format, so that the two compare (Compare).
	FleetFile = "scale-fleet.jsonl"
)

// WriteFiles writes ResultsFile, TableFile, PlotFile and FleetFile into dir (created if
// missing).
func WriteFiles(dir string, r *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("scale results dir: %w", err)
	}
	for name, write := range map[string]func(io.Writer, *Results) error{
		ResultsFile: func(w io.Writer, r *Results) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		},
		TableFile: WriteTable,
		PlotFile:  WriteHTML,
		FleetFile: WriteFleetRows,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("scale results: %w", err)
		}
		werr := write(f, r)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("write %s: %w", name, werr)
		}
	}
	return nil
}

// ReadResults reads a ResultsFile.
func ReadResults(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scale results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return &r, nil
}

// Merge adds other's clusters to r (a later run of other node counts): a node count both
// measured keeps r's. Stopped then names the clusters that ended early.
func (r *Results) Merge(other *Results) {
	have := map[int]bool{}
	for _, c := range r.Clusters {
		have[c.Nodes] = true
	}
	for _, c := range other.Clusters {
		if !have[c.Nodes] {
			r.Clusters = append(r.Clusters, c)
		}
	}
	sort.SliceStable(r.Clusters, func(i, j int) bool { return r.Clusters[i].Nodes < r.Clusters[j].Nodes })
	var stopped []string
	for _, c := range r.Clusters {
		if c.Error != "" {
			stopped = append(stopped, fmt.Sprintf("N=%d: %s", c.Nodes, c.Error))
		}
	}
	r.Stopped = strings.Join(stopped, "; ")
}

// phases are every phase of r, by node count then period.
func (r *Results) phases() []Phase {
	var out []Phase
	for _, c := range r.Clusters {
		out = append(out, c.Phases...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Nodes != out[j].Nodes {
			return out[i].Nodes < out[j].Nodes
		}
		return out[i].PeriodSeconds < out[j].PeriodSeconds
	})
	return out
}

// WriteTable writes docs/scale.md's table: one row per node count and period.
func WriteTable(w io.Writer, r *Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| N | period | CSINode writes/s | writes per node-min | writes per truth change | API req/s per node | capacity share of API req | plugin lookups/s (bound) | lag p50 / p99 / max | stale attach failures | plugin CPU %% / RSS MiB per node | kubelet CPU %% per node | stuck ContainerCreating | load 1m |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, p := range r.phases() {
		fmt.Fprintf(&b, "| %d | %d s | %.2f | %.2f | %.2f | %.2f | %.1f%% | %.2f (%.1f) | %.1f / %.1f / %.1f s | %d | %.2f / %.0f | %.2f | %d | %.1f-%.1f |\n",
			p.Nodes, p.PeriodSeconds, p.WritesPerSecond, p.WritesPerNodePerMinute, p.WritesPerTruthChange,
			p.APIRequestsPerNodePerSecond, 100*p.CapacityShare, p.LookupsPerSecond, p.LookupBound,
			p.LagP50, p.LagP99, p.LagMax, p.StaleAttachFailures, p.PluginCPUPercent, p.PluginRSSMiB,
			p.KubeletCPUPercent, p.PodsAtEnd.Stuck, p.LoadStart, p.LoadEnd)
	}
	for _, c := range r.Clusters {
		how := "started"
		if c.GrownFrom > 0 {
			how = fmt.Sprintf("grown from %d nodes", c.GrownFrom)
		}
		fmt.Fprintf(&b, "\nN=%d: %s in %.0f s; %d pods created; after the drain (%.0f s): %d running, %d in ContainerCreating, %d unscheduled, %d failed",
			c.Nodes, how, c.StartSeconds, c.PodsCreated, c.DrainSeconds, c.AfterDrain.Running, c.AfterDrain.ContainerCreating, c.AfterDrain.Unscheduled, c.AfterDrain.Failed)
		if c.WorkloadErrors > 0 {
			fmt.Fprintf(&b, "; %d workload errors (last: %s)", c.WorkloadErrors, c.LastWorkloadError)
		}
		if c.Error != "" {
			fmt.Fprintf(&b, "; stopped: %s", c.Error)
		}
		b.WriteString("\n")
	}
	if r.Stopped != "" {
		fmt.Fprintf(&b, "\nrun stopped early: %s\n", r.Stopped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// quantile is the nearest-rank quantile q (0, 1] of sorted xs; 0 when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	if !slices.IsSorted(xs) {
		xs = slices.Sorted(slices.Values(xs))
	}
	rank := int(q*float64(len(xs)) + 0.999999)
	return xs[min(max(rank, 1), len(xs))-1]
}
