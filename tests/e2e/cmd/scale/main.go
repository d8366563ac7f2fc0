// Command scale measures capacity reporting on a local cluster of upstream binaries as it
// grows (package scale): one cluster of hollow kubelets with their node plugins that starts
// with the first node count and grows to each next one, a steady pod workload, and at each
// count, for each CSIDriver nodeAllocatableUpdatePeriodSeconds, one phase of scripted
// capacity churn. It writes scale-results.json, scale-table.md and scale-plot.html into
// --out-dir after each count.
//
//	go run ./cmd/scale --nodes=10,30,100 --periods=10s,30s,60s --out-dir=../../_output/scale
//	go run ./cmd/scale --nodes=5 --periods=10s --out-dir=/tmp/smoke   # the CI smoke
//	go run ./cmd/scale --render=a/scale-results.json,b/scale-results.json --out-dir=...  # merge, files again
//
// Ctrl-C stops the cluster under way and keeps what was measured.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/internal/cli"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/scale"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// options are the command line: scale.Options (Run's) and the lists and files around it.
type options struct {
	// Run holds the flags that go straight into scale.Options (tail, drain, pod lifetime,
	// verbosity).
	Run scale.Options
	// Nodes and Periods are the comma-separated node counts and CSIDriver periods;
	// DriverArgs the drivers' extra flags, space separated.
	Nodes, Periods, DriverArgs string
	// OutDir gets the files; Render, when set, names results files to write them again
	// from (nothing runs); FleetJSON bench/policy rows to compare with; BinDir the binary
	// cache ("": the local cluster's).
	OutDir, Render, FleetJSON, BinDir string
	// MinInterval is the drivers' --capacity-min-interval.
	MinInterval time.Duration
	// Keep keeps the run folder; RequireZeroStuck fails on a pod stuck in ContainerCreating.
	Keep, RequireZeroStuck bool
}

// AddFlags adds the command's flags to fs.
func (o *options) AddFlags(fs *pflag.FlagSet) {
	o.Run = scale.DefaultOptions("", "")
	d := &o.Run
	fs.StringVar(&o.Nodes, "nodes", "10,30,100", "node counts to measure, ascending, comma separated (1.."+strconv.Itoa(scale.MaxNodes)+"): one cluster starts with the first and grows to each next")
	fs.StringVar(&o.Periods, "periods", "10s,30s,60s", "CSIDriver nodeAllocatableUpdatePeriodSeconds to measure at each node count, comma separated")
	fs.StringVar(&o.DriverArgs, "driver-args", "", "driver flags beyond its defaults, space separated (give --min-interval to match a --capacity-min-interval)")
	fs.DurationVar(&o.MinInterval, "min-interval", d.MinInterval, "the drivers' --capacity-min-interval (the lookup bound N / min-interval)")
	fs.DurationVar(&d.Tail, "tail", d.Tail, "how long each phase goes on after its script and one period")
	fs.DurationVar(&d.Drain, "drain", d.Drain, "after the last phase of each node count, the longest wait for the workload's pods to run (it ends when they all do)")
	fs.DurationVar(&d.PodLifetime, "pod-lifetime", d.PodLifetime, "how long the workload keeps a pod (it keeps one per node)")
	fs.IntVarP(&d.Verbosity, "v", "v", d.Verbosity, "the components' log verbosity")
	fs.StringVar(&o.OutDir, "out-dir", "_output/scale", "folder for "+scale.ResultsFile+", "+scale.TableFile+" and "+scale.PlotFile)
	fs.StringVar(&o.Render, "render", "", "write the results, table and plot again from these "+scale.ResultsFile+" files (comma separated: their clusters merged, by node count); runs nothing")
	fs.StringVar(&o.FleetJSON, "fleet-json", "", "bench/policy --fleet-json rows to compare with the measured phases at the same node count and period: writes "+scale.CompareFile+" into --out-dir")
	fs.StringVar(&o.BinDir, "bin-dir", "", "binary cache (default: the local cluster's, localcluster build)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the cluster's run folder (logs); by default it is deleted after a clean run")
	fs.BoolVar(&o.RequireZeroStuck, "require-zero-stuck", false, "fail when any pod is stuck in ContainerCreating (the CI smoke)")
}

// Validate reports every problem of the lists at once (scale.Run checks the rest); with
// --render nothing runs and they are not read.
func (o *options) Validate() error {
	if o.Render != "" {
		return nil
	}
	_, err := o.lists()
	return err
}

// lists parses --nodes and --periods.
func (o *options) lists() (scale.Options, error) {
	d := o.Run
	var errs []error
	var err error
	d.Nodes, err = parseInts(o.Nodes)
	errs = append(errs, err)
	d.Periods, err = parseDurations(o.Periods)
	errs = append(errs, err)
	return d, errors.Join(errs...)
}

// run parses args and measures (or with --render writes the files again) until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	cmd := cli.NewRoot(&cobra.Command{
		Use:   "scale",
		Short: "Measure capacity reporting on a local cluster of hollow kubelets as it grows (package scale)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if o.Render != "" {
				return render(o)
			}
			return measure(cmd.Context(), o, stdout)
		},
	}, stdout, stderr)
	o.AddFlags(cmd.Flags())
	return cli.Execute(ctx, cmd, args)
}

// render writes the files again from the --render results files, their clusters merged.
func render(o options) error {
	var r *scale.Results
	for _, path := range strings.Split(o.Render, ",") {
		next, err := scale.ReadResults(path)
		if err != nil {
			return err
		}
		if r == nil {
			r = next
			continue
		}
		r.Merge(next)
	}
	if err := scale.WriteFiles(o.OutDir, r); err != nil {
		return err
	}
	return writeComparison(o.OutDir, o.FleetJSON, r)
}

// measure runs the clusters (scale.Run) and writes the comparison; with
// --require-zero-stuck a stuck pod fails it.
func measure(ctx context.Context, o options, stdout io.Writer) error {
	d, err := o.lists()
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if d.RepoRoot, err = localcluster.FindRepoRoot(wd); err != nil {
		return err
	}
	if d.BinDir = o.BinDir; d.BinDir == "" {
		if d.BinDir, err = localcluster.DefaultCacheDir(); err != nil {
			return err
		}
	}
	d.MinInterval, d.KeepRunDirs, d.Out = o.MinInterval, o.Keep, stdout
	d.DriverArgs = strings.Fields(o.DriverArgs)
	start := time.Now()
	res, err := scale.Run(ctx, d, o.OutDir)
	fmt.Fprintf(stdout, "scale: %s in %s; results in %s (%s, %s, %s, %s)\n", outcome(err), time.Since(start).Round(time.Second), o.OutDir,
		scale.ResultsFile, scale.TableFile, scale.PlotFile, scale.FleetFile)
	if err != nil {
		return err
	}
	if err := writeComparison(o.OutDir, o.FleetJSON, res); err != nil {
		return err
	}
	if o.RequireZeroStuck {
		return checkStuck(res)
	}
	return nil
}

// writeComparison writes scale.CompareFile into dir: r's phases beside the rows of the
// --fleet-json file fleetJSON at the same node count and period. Nothing without fleetJSON.
func writeComparison(dir, fleetJSON string, r *scale.Results) error {
	if fleetJSON == "" {
		return nil
	}
	sim, err := scale.ReadFleetFile(fleetJSON)
	if err != nil {
		return err
	}
	cs := scale.Compare(r, sim)
	if len(cs) == 0 {
		return fmt.Errorf("--fleet-json %s: no row has the node count and period of a measured phase", fleetJSON)
	}
	out, err := os.Create(filepath.Join(dir, scale.CompareFile))
	if err != nil {
		return fmt.Errorf("comparison: %w", err)
	}
	werr := scale.WriteComparison(out, cs)
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

func outcome(err error) string {
	if err != nil {
		return "stopped early"
	}
	return "done"
}

// checkStuck fails when any phase ended, or any drain left, a pod stuck in
// ContainerCreating.
func checkStuck(res *scale.Results) error {
	var errs []error
	for _, c := range res.Clusters {
		for _, p := range c.Phases {
			if p.PodsAtEnd.Stuck > 0 {
				errs = append(errs, fmt.Errorf("N=%d period %d s: %d pods stuck in ContainerCreating", p.Nodes, p.PeriodSeconds, p.PodsAtEnd.Stuck))
			}
		}
		if c.AfterDrain.ContainerCreating > 0 {
			errs = append(errs, fmt.Errorf("N=%d: %d pods still in ContainerCreating after the drain", c.Nodes, c.AfterDrain.ContainerCreating))
		}
	}
	return errors.Join(errs...)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--nodes: %q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		v, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--periods: %w", err)
		}
		out = append(out, v)
	}
	return out, nil
}
