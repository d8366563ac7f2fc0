package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/internal/cli"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/paging"
	"github.com/fakecloud/fakecloud-csi/pkg/version"
)

// fixedBounds describes the bounds no flag changes, for --help (docs/limits.md has them
// all).
func fixedBounds() string {
	return fmt.Sprintf(`
Fixed bounds (docs/limits.md; 400 InvalidArgument unless said otherwise):
  identifiers and names (path, query, body)  1-%d bytes, no control characters
  error messages                            %d bytes, quoting at most %d bytes of any input
  request headers                           64 KiB (431)
  pages of /v1/volumes, snapshots, events, faults  maxResults 100 by default, at most %d
  injected latency of one request           %d ms in total, then 503 Unavailable
  FaultFired events of one request          %d, then one FaultFiredMore
  a body on a route that takes none         refused
`, cloud.MaxIDBytes, cloud.MaxMessageBytes, cloud.MaxQuotedBytes, paging.MaxSize, faults.MaxLatency.Milliseconds(), server.MaxFiredEventsPerRequest)
}

// cobraUsage is cobra's own usage function (its default, rendered without text/template),
// as a command and its parents without a usage function or template of their own print.
func cobraUsage() func(*cobra.Command) error { return (&cobra.Command{}).UsageFunc() }

// usageWithBounds prints usage's text, then fixedBounds, to the command's usage stream.
func usageWithBounds(usage func(*cobra.Command) error) func(*cobra.Command) error {
	return func(c *cobra.Command) error {
		if err := usage(c); err != nil {
			return err
		}
		_, err := fmt.Fprint(c.OutOrStderr(), fixedBounds())
		return err
	}
}

// run parses args and runs the command they name: `fakecloud [flags]` serves until ctx ends
// (a clean shutdown is nil); `fakecloud scenario FILE` runs a timeline; `fakecloud seed
// instances FILE` prints a seed's instance IDs; `fakecloud version`
// prints the version; `fakecloud completion bash|zsh|fish|powershell` prints a shell
// completion script. cobra and pflag, as the driver: one flag style for both binaries.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o Options
	root := cli.NewRoot(&cobra.Command{
		Use:   "fakecloud",
		Short: "The fake cloud: instances with attach limits, quotas, volumes, snapshots and fault rules over HTTP (docs/fakecloud-api.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Version {
				_, err := fmt.Fprintln(stdout, version.String("fakecloud"))
				return err
			}
			return serve(cmd.Context(), &o)
		},
	}, stdout, stderr, cli.WithCompletion(), cli.WithoutFlagHint())
	o.AddFlags(root.Flags())
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	root.Flags().AddGoFlagSet(klogFlags)
	// --help ends with the bounds no flag changes (docs/limits.md). A usage function, not
	// a template (root.UsageTemplate() + fixedBounds(), the same text): a template makes
	// cobra link text/template, whose method lookup by name keeps every exported method
	// of every type in the binary (issue 28: 4 MB of binary, 2 MB of idle RSS).
	root.SetUsageFunc(usageWithBounds(cobraUsage()))
	root.AddCommand(scenarioCommand(stdout), seedCommand(stdout))
	root.AddCommand(&cobra.Command{Use: "version", Short: "Print the version and commit (as --version)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, version.String("fakecloud"))
			return err
		}})
	return cli.Execute(ctx, root, args)
}

// serve validates o, starts the fake cloud and serves until ctx ends.
func serve(ctx context.Context, o *Options) error {
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
