package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/paging"
	"github.com/fakecloud/fakecloud-csi/pkg/version"
)

// fixedBounds describes the bounds no flag changes, for --help (README, "Limits", has them
// all).
func fixedBounds() string {
	return fmt.Sprintf(`
Fixed bounds (README "Limits"; 400 InvalidArgument unless said otherwise):
  identifiers and names (path, query, body)  1-%d bytes, no control characters
  error messages                            %d bytes, quoting at most %d bytes of any input
  request headers                           64 KiB (431)
  pages of /v1/volumes, snapshots, events, faults  maxResults 100 by default, at most %d
  injected latency of one request           %d ms in total, then 503 Unavailable
  FaultFired events of one request          %d, then one FaultFiredMore
  a body on a route that takes none         refused
`, cloud.MaxIDBytes, cloud.MaxMessageBytes, cloud.MaxQuotedBytes, paging.MaxSize, faults.MaxLatency.Milliseconds(), server.MaxFiredEventsPerRequest)
}

// run parses args, starts the fake cloud and serves until ctx ends; a clean shutdown is nil.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "scenario" {
		return runScenario(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 1 && args[0] == "version" { // as the driver's `version`
		_, err := fmt.Fprintln(stdout, version.String("fakecloud"))
		return err
	}
	// pflag, as the driver and Kubernetes use: --flag in --help, one flag style for both
	// binaries. klog's flags come from its Go flag set.
	fs := pflag.NewFlagSet("fakecloud", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	o.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	fs.Usage = func() {
		out := fs.Output()
		_, _ = fmt.Fprintln(out, "Usage of fakecloud [flags] (serve), fakecloud scenario [flags] FILE (run a timeline of examples/scenarios), fakecloud version:")
		fs.PrintDefaults()
		_, _ = fmt.Fprint(out, fixedBounds())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Version {
		_, err := fmt.Fprintln(stdout, version.String("fakecloud"))
		return err
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("invalid flags:\n%w", err)
	}
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	ver, commit := version.Get()
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "version", ver, "commit", commit)
	cfg.Logger = &logger
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	runErr := srv.Run(klog.NewContext(ctx, logger))
	if err := srv.Close(); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}
