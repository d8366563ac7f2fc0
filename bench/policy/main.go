// Command policy compares capacity reporters — a static limit, a naive one that reports the
// raw value of every lookup, and the capacity package's policy — by replaying the same
// seeded capacity traces (step changes, the same with flaky lookups, an outage, ±1 quota
// noise, a quota squeeze) through a simple model of the kubelet, the scheduler and the
// attacher on N nodes. It is deterministic for a seed and runs in seconds:
//
//	go run ./bench/policy [--seed=1] [--nodes=8] [--period=10s] [--quota-share=none]
//
// With --fleet it runs the same Reporter on thousands of nodes instead (fleet.go), for the
// cost per node and for the fleet in CSINode writes and cloud lookups:
//
//	go run ./bench/policy --fleet [--fleet-nodes=10000] [--fleet-periods=10,30,60] [--fleet-json=FILE]
//
// --help lists every flag.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/internal/cli"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// options are the command's flags: the comparison's parameters (params), the policy's
// settings (capacity.Params) and the fleet mode's (fleetOptions).
type options struct {
	seed       uint64
	nodes      int
	period     time.Duration
	duration   time.Duration
	quotaShare string
	staleAfter time.Duration
	maxStep    int64
	window     time.Duration
	maxWindow  time.Duration
	minInt     time.Duration
	liveFloor  bool
	refresh    bool
	fleet      fleetOptions
}

// AddFlags adds the command's flags to fs.
func (o *options) AddFlags(fs *pflag.FlagSet) {
	d := defaultParams()
	fs.Uint64Var(&o.seed, "seed", d.Seed, "random seed of the workload and the noise")
	fs.IntVar(&o.nodes, "nodes", d.Nodes, "number of nodes")
	fs.DurationVar(&o.period, "period", time.Duration(d.Period)*time.Second, "kubelet NodeGetInfo period (whole seconds)")
	fs.DurationVar(&o.duration, "duration", time.Duration(d.Duration)*time.Second, "simulated time per scenario")
	fs.StringVar(&o.quotaShare, "quota-share", string(d.Capacity.QuotaShare), "quota share of the naive, oracle and policy reporters: none|even")
	fs.DurationVar(&o.staleAfter, "capacity-stale-after", d.Capacity.StaleAfter, "policy: last known good lifetime")
	fs.Int64Var(&o.maxStep, "capacity-max-step", d.Capacity.MaxStep, "policy: largest increase per refresh (0: none)")
	fs.DurationVar(&o.window, "capacity-stability-window", d.Capacity.StabilityWindow, "policy: how long an increase must hold")
	fs.DurationVar(&o.maxWindow, "capacity-max-stability-window", d.Capacity.MaxStabilityWindow, "policy: longest window flap damping may stretch to")
	fs.DurationVar(&o.minInt, "capacity-min-interval", d.Capacity.MinInterval, "policy: minimum time between lookups")
	fs.BoolVar(&o.liveFloor, "live-floor", d.LiveFloor, "policy: the floor follows the node's live count of staged volumes (false: the last reading's attached count)")
	fs.BoolVar(&o.fleet.on, "fleet", false, "run the fleet mode instead of the comparison: the policy on --fleet-nodes nodes")
	fs.StringVar(&o.fleet.nodes, "fleet-nodes", "10000", "fleet mode: fleet sizes, comma-separated")
	fs.StringVar(&o.fleet.periods, "fleet-periods", "10,30,60", "fleet mode: kubelet periods in seconds, comma-separated")
	fs.StringVar(&o.fleet.scenarios, "fleet-scenarios", "all", "fleet mode: steady, quota-cut, exhausted, or all, comma-separated")
	fs.StringVar(&o.fleet.shares, "fleet-shares", "none,even", "fleet mode: quota shares, comma-separated")
	fs.DurationVar(&o.fleet.spread, "fleet-spread", time.Minute, "fleet mode: the --capacity-increase-spread of the quota-cut runs' after (0: no after)")
	fs.DurationVar(&o.fleet.duration, "fleet-duration", time.Hour, "fleet mode: simulated time per run (quota changes at a third and two thirds of it)")
	fs.StringVar(&o.fleet.jsonOut, "fleet-json", "", "fleet mode: also write one JSON object per run to this file (the comparison format)")
	fs.IntVar(&o.fleet.at, "fleet-at", 5000, "fleet mode: the cluster size the per-node figures are scaled to in the table")
	fs.BoolVar(&o.refresh, "refresh", d.Refresh, "policy: look the cloud up whenever a lookup is due, as the driver's background refresher does (false: only when the kubelet asks)")
}

// Validate reports every problem of the flags at once.
func (o *options) Validate() error {
	_, err := o.params()
	return err
}

// params are the comparison's parameters from the flags, and every problem with them.
func (o *options) params() (params, error) {
	p := defaultParams()
	var errs []error
	share, err := capacity.ParseQuotaShare(o.quotaShare)
	errs = append(errs, err)
	if o.nodes < 2 {
		errs = append(errs, fmt.Errorf("nodes must be >= 2, got %d", o.nodes))
	}
	if o.period < time.Second || o.period%time.Second != 0 {
		errs = append(errs, fmt.Errorf("period must be whole seconds >= 1s, got %s", o.period))
	}
	if o.duration < time.Hour {
		errs = append(errs, fmt.Errorf("duration must be >= 1h (the traces run to 100m), got %s", o.duration))
	}
	p.Seed, p.Nodes = o.seed, o.nodes
	p.Period, p.Duration = int(o.period/time.Second), int(o.duration/time.Second)
	p.Capacity.QuotaShare = share
	p.Capacity.StaleAfter, p.Capacity.MaxStep = o.staleAfter, o.maxStep
	p.Capacity.StabilityWindow, p.Capacity.MinInterval = o.window, o.minInt
	p.Capacity.MaxStabilityWindow = o.maxWindow
	p.LiveFloor, p.Refresh = o.liveFloor, o.refresh
	errs = append(errs, p.Capacity.Validate())
	return p, errors.Join(errs...)
}

var reporterNames = []string{"static", "naive", "policy", "oracle (reference)"}

// reporterHealthBlind is the policy with the instance health stripped from its readings: it
// holds its value for an impaired node, the alternative to the floor it takes
// (docs/policy.md, "Impaired instances"). Run on the health traces only.
const reporterHealthBlind = "policy, health ignored"

func newReporter(name string, p params, w *world) (reporter, error) {
	switch name {
	case "static":
		s := &staticReporter{}
		for n := range p.Nodes {
			s.v = append(s.v, capacity.Reportable(int64(w.limit[n]-w.oob[n])))
		}
		return s, nil
	case "naive":
		return &naiveReporter{w: w, share: p.Capacity.QuotaShare, last: make([]int64, p.Nodes)}, nil
	case "policy":
		return newPolicyReporter(p, w)
	case reporterHealthBlind:
		return newPolicyReporterSeeing(p, w, true)
	default:
		return &oracleReporter{w: w, share: p.Capacity.QuotaShare}, nil
	}
}

// compare runs every scenario against every reporter; results[scenario][reporter].
func compare(ctx context.Context, p params) (map[string]map[string]result, error) {
	out := map[string]map[string]result{}
	for i, sc := range scenarios(p.Nodes) {
		wl := newWorkload(p, sc, i)
		out[sc.name] = map[string]result{}
		for _, name := range sc.reporters() {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			pp := p
			if sc.quota > 0 {
				pp.Quota = sc.quota
			}
			w := newWorld(pp)
			if sc.lookupFailP > 0 {
				// The same draws for every reporter; they use them at their own pace.
				w.lookupFailP, w.flaky = sc.lookupFailP, rand.New(rand.NewPCG(p.Seed, uint64(1000+i)))
			}
			rep, err := newReporter(name, pp, w)
			if err != nil {
				return nil, fmt.Errorf("scenario %s reporter %s: %w", sc.name, name, err)
			}
			out[sc.name][name] = simulate(pp, sc, wl, w, rep)
		}
	}
	return out, nil
}

// run parses args and runs the comparison, or with --fleet the fleet mode, until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	cmd := cli.NewRoot(&cobra.Command{
		Use:   "policy",
		Short: "Compare capacity reporters (static, naive, the capacity policy) on replayed capacity traces; --fleet: the policy on thousands of nodes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.fleet.on {
				// --nodes and --period are the comparison's; the fleet has its own lists.
				o.nodes = max(o.nodes, 2)
			}
			p, err := o.params()
			if err != nil {
				return err
			}
			if o.fleet.on {
				fp := defaultFleetParams()
				fp.Seed, fp.Capacity, fp.LiveFloor, fp.Refresh = p.Seed, p.Capacity, p.LiveFloor, p.Refresh
				return runFleet(cmd.Context(), fp, o.fleet, stdout)
			}
			res, err := compare(cmd.Context(), p)
			if err != nil {
				return err
			}
			printComparison(stdout, p, res)
			return nil
		},
	}, stdout, stderr)
	o.AddFlags(cmd.Flags())
	return cli.Execute(ctx, cmd, args)
}

// printComparison writes the comparison's table (results[scenario][reporter]), the
// scenarios and the goals.
func printComparison(stdout io.Writer, p params, res map[string]map[string]result) {
	fmt.Fprintf(stdout, "Seed %d, %d nodes × %d slots (limit %d − %d out-of-band), kubelet period %ds, %.0f pods/min of mean life %.0fs, %s per scenario.\n",
		p.Seed, p.Nodes, p.Limit-p.OutOfBand, p.Limit, p.OutOfBand, p.Period, p.ArrivalPS*60, p.MeanLife, time.Duration(p.Duration)*time.Second)
	floor := "the node's live count of staged volumes"
	if !p.LiveFloor {
		floor = "the last good reading's attached count"
	}
	lookups := "whenever due (background refresh)"
	if !p.Refresh {
		lookups = "only when the kubelet asks"
	}
	fmt.Fprintf(stdout, "Policy: stale-after %s, max-step %d, stability window %s (max %s), min interval %s, jitter %.0f%%, quota share %s, floor from %s, lookups %s.\n\n",
		p.Capacity.StaleAfter, p.Capacity.MaxStep, p.Capacity.StabilityWindow, p.Capacity.MaxStabilityWindow, p.Capacity.MinInterval, p.Capacity.Jitter*100, p.Capacity.QuotaShare, floor, lookups)
	fmt.Fprintln(stdout, "| scenario | reporter | stale-capacity attach failures | pods rejected | CSINode writes | pending pod-min | stuck pod-min | pods started |")
	fmt.Fprintln(stdout, "|---|---|---:|---:|---:|---:|---:|---:|")
	total := map[string]*result{}
	for _, name := range reporterNames {
		total[name] = &result{}
	}
	for _, extra := range []bool{false, true} {
		for _, sc := range scenarios(p.Nodes) {
			if sc.extra != extra {
				continue
			}
			for _, name := range sc.reporters() {
				r := res[sc.name][name]
				if !extra {
					total[name].add(r)
				}
				printRow(stdout, sc.name, name, r)
			}
		}
		if !extra {
			for _, name := range reporterNames {
				printRow(stdout, "**all**", name, *total[name])
			}
		}
	}
	fmt.Fprintln(stdout)
	for _, sc := range scenarios(p.Nodes) {
		note := ""
		if sc.extra {
			note = " (not in **all** nor the goals)"
		}
		fmt.Fprintf(stdout, "- %s: %s%s\n", sc.name, sc.about, note)
	}
	fmt.Fprintln(stdout)
	g := checkGoals(p, res)
	fmt.Fprintln(stdout, g.String())
}

func printRow(w io.Writer, sc, name string, r result) {
	fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %.0f | %.0f | %d |\n", sc, name, r.AttachFailures, r.Rejected, r.Writes, r.PendingPodMin, r.StuckPodMin, r.Started)
}

// goals are the targets: the policy has ≥ 90% fewer stale-capacity attach failures
// than the static limit, and ≤ 10% of the naive reporter's CSINode writes under noise.
type goals struct {
	failPolicy, failStatic    int
	writesPolicy, writesNaive int
	// The same failures without the outage trace, whose truth changes while it cannot be
	// read: no node-side policy can see that change.
	observablePolicy, observableStatic int
}

func checkGoals(p params, res map[string]map[string]result) goals {
	var g goals
	for _, sc := range scenarios(p.Nodes) {
		if sc.extra {
			continue
		}
		g.failPolicy += res[sc.name]["policy"].AttachFailures
		g.failStatic += res[sc.name]["static"].AttachFailures
		if sc.name != "outage" {
			g.observablePolicy += res[sc.name]["policy"].AttachFailures
			g.observableStatic += res[sc.name]["static"].AttachFailures
		}
	}
	g.writesPolicy = res["noise"]["policy"].Writes
	g.writesNaive = res["noise"]["naive"].Writes
	return g
}

func (g goals) failuresMet() bool { return g.failPolicy*10 <= g.failStatic }
func (g goals) writesMet() bool   { return g.writesPolicy*10 <= g.writesNaive }

func (g goals) String() string {
	var b strings.Builder
	pct := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return 100 * float64(a) / float64(b)
	}
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintf(&b, "Goal 1, policy stale-capacity attach failures <= 10%% of static: %d vs %d (%.1f%%): %s\n",
		g.failPolicy, g.failStatic, pct(g.failPolicy, g.failStatic), mark(g.failuresMet()))
	fmt.Fprintf(&b, "        the same without the outage trace: %d vs %d (%.1f%%)\n",
		g.observablePolicy, g.observableStatic, pct(g.observablePolicy, g.observableStatic))
	fmt.Fprintf(&b, "Goal 2, policy CSINode writes under noise <= 10%% of naive: %d vs %d (%.1f%%): %s",
		g.writesPolicy, g.writesNaive, pct(g.writesPolicy, g.writesNaive), mark(g.writesMet()))
	return b.String()
}
