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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// flags are the command line, parsed into scale.Options.
type flags struct {
	nodes, periods, driverArgs string
	outDir, render, fleetJSON  string
	binDir                     string
	minInterval                time.Duration
	keep                       bool
	requireZeroStuck           bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	d := scale.DefaultOptions("", "")
	fs.StringVar(&f.nodes, "nodes", "10,30,100", "node counts to measure, ascending, comma separated (1.."+strconv.Itoa(scale.MaxNodes)+"): one cluster starts with the first and grows to each next")
	fs.StringVar(&f.periods, "periods", "10s,30s,60s", "CSIDriver nodeAllocatableUpdatePeriodSeconds to measure at each node count, comma separated")
	fs.StringVar(&f.driverArgs, "driver-args", "", "driver flags beyond its defaults, space separated (give --min-interval to match a --capacity-min-interval)")
	fs.DurationVar(&f.minInterval, "min-interval", d.MinInterval, "the drivers' --capacity-min-interval (the lookup bound N / min-interval)")
	fs.DurationVar(&d.Tail, "tail", d.Tail, "how long each phase goes on after its script and one period")
	fs.DurationVar(&d.Drain, "drain", d.Drain, "after the last phase of each node count, the longest wait for the workload's pods to run (it ends when they all do)")
	fs.DurationVar(&d.PodLifetime, "pod-lifetime", d.PodLifetime, "how long the workload keeps a pod (it keeps one per node)")
	fs.IntVar(&d.Verbosity, "v", d.Verbosity, "the components' log verbosity")
	fs.StringVar(&f.outDir, "out-dir", "_output/scale", "folder for "+scale.ResultsFile+", "+scale.TableFile+" and "+scale.PlotFile)
	fs.StringVar(&f.render, "render", "", "write the results, table and plot again from these "+scale.ResultsFile+" files (comma separated: their clusters merged, by node count); runs nothing")
	fs.StringVar(&f.fleetJSON, "fleet-json", "", "bench/policy -fleet-json rows to compare with the measured phases at the same node count and period: writes "+scale.CompareFile+" into --out-dir")
	fs.StringVar(&f.binDir, "bin-dir", "", "binary cache (default: the local cluster's, localcluster build)")
	fs.BoolVar(&f.keep, "keep", false, "keep the cluster's run folder (logs); by default it is deleted after a clean run")
	fs.BoolVar(&f.requireZeroStuck, "require-zero-stuck", false, "fail when any pod is stuck in ContainerCreating (the CI smoke)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if f.render != "" {
		var r *scale.Results
		for _, path := range strings.Split(f.render, ",") {
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
		if err := scale.WriteFiles(f.outDir, r); err != nil {
			return err
		}
		return writeComparison(f.outDir, f.fleetJSON, r)
	}
	var errs []error
	nodes, err := parseInts(f.nodes)
	errs = append(errs, err)
	periods, err := parseDurations(f.periods)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if d.RepoRoot, err = localcluster.FindRepoRoot(wd); err != nil {
		return err
	}
	if d.BinDir = f.binDir; d.BinDir == "" {
		if d.BinDir, err = localcluster.DefaultCacheDir(); err != nil {
			return err
		}
	}
	d.Nodes, d.Periods, d.MinInterval, d.KeepRunDirs, d.Out = nodes, periods, f.minInterval, f.keep, stdout
	d.DriverArgs = strings.Fields(f.driverArgs)
	start := time.Now()
	res, err := scale.Run(ctx, d, f.outDir)
	fmt.Fprintf(stdout, "scale: %s in %s; results in %s (%s, %s, %s, %s)\n", outcome(err), time.Since(start).Round(time.Second), f.outDir,
		scale.ResultsFile, scale.TableFile, scale.PlotFile, scale.FleetFile)
	if err != nil {
		return err
	}
	if err := writeComparison(f.outDir, f.fleetJSON, res); err != nil {
		return err
	}
	if f.requireZeroStuck {
		return checkStuck(res)
	}
	return nil
}

// writeComparison writes scale.CompareFile into dir: r's phases beside the rows of the
// -fleet-json file fleetJSON at the same node count and period. Nothing without fleetJSON.
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
