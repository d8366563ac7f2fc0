// Command capacityplot watches a cluster running the fakecloud CSI driver
// together with its fake cloud for a while and writes capacity-plot.html
// (one self-contained page: per node, cloud truth, CSINode count, volumes
// scheduled over time, with CSINode writes and update lag) and
// csinode-writes.txt into an output folder.
//
//	go run ./cmd/capacityplot --run-dir=/tmp/fcsi-... --duration=2m
//	go run ./cmd/capacityplot --kubeconfig=kc --cloud-url=http://127.0.0.1:8080 \
//	    --cloud-token-file=admin.token --duration=10m --out-dir=plots
//	go run ./cmd/capacityplot --run-dir=/tmp/fcsi-... --out-dir=plots \
//	    --scenario=../../examples/scenarios/quota-squeeze.yaml
//
// With --scenario it runs that timeline (package scenario) against the fake cloud while it
// observes, for the scenario's length plus --tail unless --duration is given.
//
// Every run also writes capacity-recording.json, the data of the plot. With --from-recording
// it observes nothing and draws that file again (the plot of an earlier run with a newer
// version of this command; docs/capacity-plot.html is drawn so):
//
//	go run ./cmd/capacityplot --from-recording=plots/capacity-recording.json --out-dir=replot
//
// It stops early, and still writes the files, on Ctrl-C.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/internal/cli"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/capacityplot"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// progressEvery is how often the tool says it is still observing: docs/local-cluster.md promises no
// step silent for more than 30 s.
const progressEvery = 20 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "capacityplot:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	// RunDir is a local cluster's run folder (its cluster.json gives the
	// kubeconfig, cloud URL and token, and the node plugins' URLs); explicit
	// flags win over it.
	RunDir         string
	Kubeconfig     string
	CloudURL       string
	CloudToken     string
	CloudTokenFile string
	// Duration is how long to observe; Interval the time between samples.
	Duration, Interval time.Duration
	// OutDir receives capacity-plot.html and csinode-writes.txt.
	OutDir     string
	Driver     string
	QuotaShare string
	// PluginURLs are node=URL pairs of node plugin HTTP endpoints.
	PluginURLs pluginURLs
	Title      string
	// Scenario is a timeline to run while observing; Tail how long to observe after its
	// last step; MapInstance FROM=TO renames of its instances.
	Scenario    string
	Tail        time.Duration
	MapInstance []string
	// FromRecording is a capacity-recording.json to draw again instead of observing.
	FromRecording string
}

type pluginURLs map[string]string

func (p *pluginURLs) String() string {
	var parts []string
	for k, v := range *p {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

// Type names the value in --help (pflag.Value).
func (p *pluginURLs) Type() string { return "NODE=URL" }

func (p *pluginURLs) Set(s string) error {
	node, url, ok := strings.Cut(s, "=")
	if !ok || node == "" || url == "" {
		return fmt.Errorf("expected NODE=URL, got %q", s)
	}
	if *p == nil {
		*p = pluginURLs{}
	}
	(*p)[node] = url
	return nil
}

// AddFlags adds the command's flags to fs.
func (o *options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.RunDir, "run-dir", "", "local cluster run folder (from `localcluster up`; \"current\": the last make up-local's); fills the kubeconfig, cloud and plugin URL flags")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (env KUBECONFIG)")
	fs.StringVar(&o.CloudURL, "cloud-url", "", "fake cloud base URL, e.g. http://127.0.0.1:8080")
	fs.StringVar(&o.CloudToken, "cloud-token", "", "fake cloud admin token (it reads capacity, quotas and events)")
	fs.StringVar(&o.CloudTokenFile, "cloud-token-file", "", "file with the fake cloud admin token")
	fs.DurationVar(&o.Duration, "duration", 2*time.Minute, "how long to observe")
	fs.DurationVar(&o.Interval, "interval", 2*time.Second, "time between samples")
	fs.StringVar(&o.OutDir, "out-dir", ".", "folder for "+capacityplot.PlotFile+", "+capacityplot.SummaryFile+" and "+capacityplot.RecordingFile)
	fs.StringVar(&o.FromRecording, "from-recording", "", "draw this "+capacityplot.RecordingFile+" (of an earlier run) again into --out-dir instead of observing a cluster")
	fs.StringVar(&o.Driver, "driver", localcluster.DriverName, "CSI driver name")
	fs.StringVar(&o.QuotaShare, "quota-share", string(capacityplot.QuotaShareNone), "the driver's --quota-share: none|even")
	fs.Var(&o.PluginURLs, "plugin-url", "NODE=URL of a node plugin's --http-addr, to plot its reported value (repeatable)")
	fs.StringVar(&o.Title, "title", "", "plot title")
	fs.StringVar(&o.Scenario, "scenario", "", "a timeline (examples/scenarios/*.yaml) to run against the fake cloud while observing")
	fs.DurationVar(&o.Tail, "tail", time.Minute, "with --scenario and no --duration: how long to observe after the last step")
	fs.StringArrayVar(&o.MapInstance, "map-instance", nil, "with --scenario, FROM=TO: run the file's steps for instance FROM on TO (e.g. node-a2=node-1); repeatable")
}

// complete fills connection flags and plugin URLs from --run-dir.
func (o *options) complete() error {
	if o.RunDir == "" {
		return nil
	}
	if o.RunDir == "current" { // the cluster of the last `make up-local`
		bin, err := localcluster.DefaultCacheDir()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "current-run"))
		if err != nil {
			return fmt.Errorf("--run-dir=current: no cluster of make up-local: %w", err)
		}
		o.RunDir = strings.TrimSpace(string(data))
	}
	info, err := localcluster.ReadInfo(o.RunDir)
	if err != nil {
		return err
	}
	if o.Kubeconfig == "" || o.Kubeconfig == os.Getenv("KUBECONFIG") {
		o.Kubeconfig = info.Kubeconfig
	}
	if o.CloudURL == "" {
		o.CloudURL = info.CloudURL
	}
	if o.CloudToken == "" && o.CloudTokenFile == "" {
		o.CloudToken, o.CloudTokenFile = info.AdminToken, info.AdminTokenFile
	}
	if len(o.PluginURLs) == 0 && len(info.PluginURLs) > 0 {
		o.PluginURLs = pluginURLs{}
		for node, url := range info.PluginURLs {
			o.PluginURLs[node] = url
		}
	}
	return nil
}

// Validate reports every problem at once.
func (o *options) Validate() error {
	var errs []error
	if o.Kubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig (or --run-dir) is required"))
	}
	if o.CloudURL == "" {
		errs = append(errs, errors.New("--cloud-url (or --run-dir) is required"))
	} else if err := cloud.CheckBaseURL(o.CloudURL); err != nil {
		errs = append(errs, fmt.Errorf("--cloud-url: %w", err))
	}
	if o.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--duration must be > 0, got %s", o.Duration))
	}
	if o.OutDir == "" {
		errs = append(errs, errors.New("--out-dir must not be empty"))
	}
	ro := capacityplot.Options{Driver: o.Driver, Interval: o.Interval, Share: capacityplot.QuotaShare(o.QuotaShare)}
	if err := ro.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// run parses args and observes the cluster (running the scenario, if any) for the duration,
// or with --from-recording draws an earlier run again; then it writes the files.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	cmd := cli.NewRoot(&cobra.Command{
		Use:   "capacityplot",
		Short: "Watch a cluster running the fakecloud CSI driver and its fake cloud, and plot capacity over time",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected arguments %v", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.FromRecording != "" {
				if o.Scenario != "" {
					return errors.New("--from-recording draws an earlier run: it takes no --scenario")
				}
				return replot(o.FromRecording, o.OutDir, stdout)
			}
			sc, err := o.loadScenario(cmd.Flags().Changed("duration"))
			if err != nil {
				return err
			}
			if err := o.complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return observe(cmd.Context(), o, sc, stdout)
		},
	}, stdout, stderr)
	o.AddFlags(cmd.Flags())
	return cli.Execute(ctx, cmd, args)
}

// loadScenario reads --scenario (nil without one) with --map-instance applied; the
// observation lasts its length plus --tail unless durationSet, and the title is its
// expectation unless --title is given.
func (o *options) loadScenario(durationSet bool) (*scenario.Scenario, error) {
	if o.Scenario == "" {
		return nil, nil
	}
	data, err := os.ReadFile(o.Scenario)
	if err != nil {
		return nil, err
	}
	sc, err := scenario.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Scenario, err)
	}
	m, err := scenario.ParseInstanceMap(o.MapInstance)
	if err != nil {
		return nil, err
	}
	sc.MapInstances(m)
	if !durationSet {
		o.Duration = sc.Duration() + o.Tail
	}
	if o.Title == "" {
		o.Title = "scenario " + sc.Name + ": " + sc.Expect
	}
	return sc, nil
}

// newRecorder connects to the cluster and the fake cloud and returns the recorder and the
// cloud's client.
func newRecorder(o options) (*capacityplot.Recorder, *admin.Client, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	copts := []cloud.Option{cloud.WithUserAgent("fakecloud-csi-capacityplot")}
	switch {
	case o.CloudToken != "":
		copts = append(copts, cloud.WithToken(o.CloudToken))
	case o.CloudTokenFile != "":
		copts = append(copts, cloud.WithTokenFile(o.CloudTokenFile))
	}
	cc, err := admin.NewClient(o.CloudURL, copts...)
	if err != nil {
		return nil, nil, err
	}
	title := o.Title
	if title == "" {
		title = "CSINode capacity over time, " + time.Now().Format("2006-01-02 15:04")
	}
	rec, err := capacityplot.NewRecorder(cs, cc, capacityplot.Options{Driver: o.Driver, Interval: o.Interval,
		Share: capacityplot.QuotaShare(o.QuotaShare), PluginURLs: o.PluginURLs, Title: title})
	return rec, cc, err
}

// startScenario runs sc (nil: none) against the fake cloud until ctx ends, printing each
// step; its error comes on the channel.
func startScenario(ctx context.Context, cc *admin.Client, sc *scenario.Scenario, stdout io.Writer) <-chan error {
	done := make(chan error, 1)
	if sc == nil {
		done <- nil
		return done
	}
	fmt.Fprintf(stdout, "scenario %s: %s\nexpect: %s\n", sc.Name, sc.Description, sc.Expect)
	r := scenario.Runner{API: cc, Report: func(at time.Duration, s scenario.Step, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "FAILED: " + err.Error()
		}
		fmt.Fprintf(stdout, "%8s  %s  %s\n", "+"+at.String(), s.Describe(), outcome)
	}, Waiting: func(next scenario.Step, at, in time.Duration) {
		fmt.Fprintf(stdout, "%8s  next step '%s' at t=%v, in %v\n", "", next.Describe(), at, in.Round(time.Second))
	}}
	go func() { done <- r.Run(ctx, sc) }()
	return done
}

// observe records for o.Duration (or until ctx ends) while sc runs, and writes the files.
func observe(ctx context.Context, o options, sc *scenario.Scenario, stdout io.Writer) error {
	rec, cc, err := newRecorder(o)
	if err != nil {
		return err
	}
	if err := rec.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "capacityplot: observing for %s (Ctrl-C writes the plot early)\n", o.Duration)
	scenarioCtx, stopScenario := context.WithCancel(ctx)
	defer stopScenario()
	scenarioDone := startScenario(scenarioCtx, cc, sc, stdout)
	// A line every progressEvery while only observing (after the last step, or with no
	// scenario), so the wait for the plot is never silent for long.
	start := time.Now()
	end := time.After(o.Duration)
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
observe:
	for {
		select {
		case <-ctx.Done():
			break observe
		case <-end:
			break observe
		case <-tick.C:
			fmt.Fprintf(stdout, "capacityplot: observed %v of %v\n", time.Since(start).Round(time.Second), o.Duration)
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plot, summary, err := capacityplot.WriteFiles(o.OutDir, rec.Stop(stopCtx))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "capacityplot: wrote %s and %s\n", plot, summary)
	// A scenario longer than --duration stops with the observation.
	stopScenario()
	if err := <-scenarioDone; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// replot draws the recording in file again into outDir.
func replot(file, outDir string, stdout io.Writer) error {
	if outDir == "" {
		return errors.New("--out-dir must not be empty")
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	rec, err := capacityplot.ReadRecording(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	plot, summary, err := capacityplot.WriteFiles(outDir, rec)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "capacityplot: drew %s again into %s and %s\n", file, plot, summary)
	return nil
}
