package scale

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// Options configure a Run. Start from DefaultOptions.
type Options struct {
	// RepoRoot is the clone; BinDir the local cluster's binary cache (localcluster.Build).
	RepoRoot, BinDir string
	// Nodes are the cluster sizes to measure, ascending, each 1..MaxNodes: one cluster
	// starts with the first and grows to each next one.
	Nodes []int
	// Periods are the CSIDriver nodeAllocatableUpdatePeriodSeconds to measure on every
	// cluster, one phase each; each 10 s to 1 h in whole seconds (the API's bounds).
	Periods []time.Duration
	// Tail is how long a phase goes on after its script's last step, beyond one period:
	// a phase lasts ScriptLength + period + Tail.
	Tail time.Duration
	// Drain bounds the wait, after the last phase of each size, for the workload's pods
	// to run (it ends as soon as they all do).
	Drain time.Duration
	// PodLifetime is how long the workload keeps a pod: it keeps one pod per node and
	// replaces one every PodLifetime / N.
	PodLifetime time.Duration
	// DriverArgs are the driver's flags on top of its defaults (the capacity policy a real
	// cluster runs: 5 s lookup interval, 30 s stability window, steps of 2).
	DriverArgs []string
	// MinInterval is the driver's --capacity-min-interval in force (DriverArgs' or the
	// default), the bound of the lookup rate: N / MinInterval.
	MinInterval time.Duration
	// Verbosity is the components' -v; low, so that logging does not dominate the cost.
	Verbosity int
	// KeepRunDirs keeps each cluster's run folder (logs) instead of deleting it.
	KeepRunDirs bool
	// Out receives progress lines.
	Out io.Writer
}

// startBatch is how many nodes the local cluster starts at a time (localcluster's
// StartBatch): at 100 nodes all at once, the API server on 2 loaded cores timed out TLS
// handshakes and 11 nodes registered in 7 minutes.
const startBatch = 10

// MaxNodes bounds Options.Nodes: every node is two processes (about 120 MiB) and three
// ports.
const MaxNodes = 500

// DefaultOptions measure 10, 30 and 100 nodes at periods of 10, 30 and 60 s.
func DefaultOptions(repoRoot, binDir string) Options {
	return Options{
		RepoRoot: repoRoot, BinDir: binDir,
		Nodes:       []int{10, 30, 100},
		Periods:     []time.Duration{10 * time.Second, 30 * time.Second, 60 * time.Second},
		Tail:        30 * time.Second,
		Drain:       3 * time.Minute,
		PodLifetime: 2 * time.Minute,
		MinInterval: 5 * time.Second,
		Verbosity:   1,
		Out:         os.Stdout,
	}
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if o.RepoRoot == "" || o.BinDir == "" {
		errs = append(errs, errors.New("RepoRoot and BinDir are required"))
	}
	if len(o.Nodes) == 0 || len(o.Periods) == 0 {
		errs = append(errs, errors.New("at least one node count and one period are required"))
	}
	for i, n := range o.Nodes {
		if n < 1 || n > MaxNodes {
			errs = append(errs, fmt.Errorf("node count %d outside 1..%d", n, MaxNodes))
		}
		if i > 0 && n <= o.Nodes[i-1] {
			errs = append(errs, fmt.Errorf("node counts %v: the cluster only grows, so each must be above the one before", o.Nodes))
		}
	}
	for _, p := range o.Periods {
		if p < 10*time.Second || p > time.Hour || p%time.Second != 0 {
			errs = append(errs, fmt.Errorf("period %s: nodeAllocatableUpdatePeriodSeconds takes whole seconds from 10 to 3600", p))
		}
	}
	if o.Tail < 0 || o.Drain <= 0 {
		errs = append(errs, fmt.Errorf("tail %s must be ≥ 0 and drain %s > 0", o.Tail, o.Drain))
	}
	if o.PodLifetime < time.Second {
		errs = append(errs, fmt.Errorf("pod lifetime %s must be ≥ 1s", o.PodLifetime))
	}
	if o.MinInterval <= 0 {
		errs = append(errs, fmt.Errorf("min interval %s must be > 0", o.MinInterval))
	}
	if o.Verbosity < 0 {
		errs = append(errs, fmt.Errorf("verbosity %d must be ≥ 0", o.Verbosity))
	}
	if o.Out == nil {
		errs = append(errs, errors.New("Out is required"))
	}
	return errors.Join(errs...)
}

// clusterOptions are the local cluster that starts with first nodes and grows to maxN: the
// e2e shapes repeated (7, 3 and 7 slots), an attachment quota that does not bind (10 per
// running node; Run raises it as the cluster grows) and a volume quota the workload never
// reaches, with the driver's default capacity policy.
func (o Options) clusterOptions(first, maxN int, runDir string) localcluster.Options {
	co := localcluster.DefaultOptions(o.RepoRoot, o.BinDir, runDir)
	base := co.Nodes
	co.Nodes = nil
	for i := range maxN {
		node := base[i%len(base)]
		node.Name = fmt.Sprintf("node-%d", i+1)
		co.Nodes = append(co.Nodes, node)
	}
	co.StartNodes = first
	co.AttachmentQuota = int64(10 * first)
	co.VolumeQuota = int64(20*maxN + 200)
	co.DriverArgs = append([]string(nil), o.DriverArgs...)
	co.StartBatch = startBatch
	co.Verbosity = o.Verbosity
	co.Out = o.Out
	return co
}
