package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/version"
)

// run parses args, starts the fake cloud and serves until ctx ends; a clean shutdown is nil.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakecloud", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	o.AddFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
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
	logger := klog.FromContext(ctx).WithValues("version", ver, "commit", commit)
	cfg.Logger = &logger
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	defer klog.Flush()
	runErr := srv.Run(klog.NewContext(ctx, logger))
	if err := srv.Close(); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}
