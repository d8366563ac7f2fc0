package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// seedCommand is `fakecloud seed instances FILE`: the seed's instance IDs, one a line, read by
// the same parser and checks as --seed, so that scripts (hack/run.sh starts a node plugin per
// instance) need not parse YAML themselves; block or flow style, comments and anchors all
// read as the server reads them.
func seedCommand(stdout io.Writer) *cobra.Command {
	seed := &cobra.Command{
		Use:   "seed",
		Short: "Read a seed file as --seed does",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("seed: want a subcommand: instances FILE")
		},
	}
	instances := &cobra.Command{
		Use:   "instances FILE",
		Short: "Print the seed's instance IDs, one a line, in file order, after the checks the server makes at start",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("seed instances: want exactly one FILE (e.g. examples/seed.yaml)")
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(_ *cobra.Command, args []string) error { return printSeedInstances(args[0], stdout) },
	}
	for _, c := range []*cobra.Command{seed, instances} {
		// cobra's own usage, not the server's with its bounds (run sets that on the root).
		c.SetUsageFunc(cobraUsage())
	}
	seed.AddCommand(instances)
	return seed
}

// printSeedInstances loads and checks the seed at path (server.LoadSeed), then prints its
// instance IDs.
func printSeedInstances(path string, stdout io.Writer) error {
	s, err := server.LoadSeed(path)
	if err != nil {
		return err
	}
	for _, in := range s.Instances {
		if _, err := fmt.Fprintln(stdout, in.ID); err != nil {
			return err
		}
	}
	return nil
}
