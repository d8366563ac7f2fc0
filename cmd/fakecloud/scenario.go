package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
)

// scenarioOptions are the flags of `fakecloud scenario`.
type scenarioOptions struct {
	// CloudURL is the fake cloud to drive.
	CloudURL string
	// Token and TokenFile give the admin token (at most one of them).
	Token, TokenFile string
	// DryRun prints the expanded timeline without calling the cloud.
	DryRun bool
	// MapInstance are FROM=TO renames of the file's instances (scenario.MapInstances).
	MapInstance []string
}

// scenarioCommand is `fakecloud scenario [flags] FILE`: the timeline of FILE against a fake
// cloud through its admin API, one line per step, until its last step or ctx ends.
func scenarioCommand(stdout io.Writer) *cobra.Command {
	var o scenarioOptions
	cmd := &cobra.Command{
		Use:   "scenario [flags] FILE",
		Short: "Run a scenario timeline (examples/scenarios/*.yaml) against a fake cloud",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("scenario: want exactly one FILE (e.g. examples/scenarios/quota-squeeze.yaml)")
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runScenario(cmd.Context(), o, args[0], stdout) },
	}
	// cobra's own usage, not the server's with its bounds (run sets that on the root).
	cmd.SetUsageTemplate((&cobra.Command{}).UsageTemplate())
	fs := cmd.Flags()
	fs.StringVar(&o.CloudURL, "cloud-url", "http://127.0.0.1:8080", "the fake cloud to drive")
	fs.StringVar(&o.Token, "token", "", "admin bearer token (make run's: demo-admin-token)")
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the admin bearer token (make up-local prints it)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print the timeline, quota noise expanded, and call nothing")
	fs.Func("map-instance", "FROM=TO: run the file's steps for instance FROM on TO (e.g. node-a2=node-1 on make up-local); repeatable", func(v string) error {
		o.MapInstance = append(o.MapInstance, v)
		return nil
	})
	return cmd
}

// runScenario runs the timeline of file with o.
func runScenario(ctx context.Context, o scenarioOptions, file string, stdout io.Writer) error {
	if o.Token != "" && o.TokenFile != "" {
		return errors.New("scenario: --token and --token-file are exclusive")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	sc, err := scenario.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	m, err := scenario.ParseInstanceMap(o.MapInstance)
	if err != nil {
		return fmt.Errorf("scenario: --map-instance: %w", err)
	}
	sc.MapInstances(m)
	_, _ = fmt.Fprintf(stdout, "scenario %s: %s (%d steps over %v)\n", sc.Name, sc.Description, len(sc.Steps), sc.Duration())
	if sc.Expect != "" {
		_, _ = fmt.Fprintf(stdout, "expect: %s\n", sc.Expect)
	}
	if o.DryRun {
		for _, s := range sc.Steps {
			_, _ = fmt.Fprintf(stdout, "%8s  %s%s\n", "+"+time.Duration(s.At).String(), s.Describe(), note(s))
		}
		return nil
	}
	token := o.Token
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return fmt.Errorf("scenario: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	var opts []cloud.Option
	if token != "" {
		opts = append(opts, cloud.WithToken(token))
	}
	client, err := cloud.NewClient(o.CloudURL, opts...)
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	_, _ = fmt.Fprintf(stdout, "driving %s; every step is also in GET /v1/events and the console: %s\n", o.CloudURL, consoleURL(o.CloudURL, token))
	r := scenario.Runner{API: client, Report: func(at time.Duration, s scenario.Step, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "FAILED: " + err.Error()
		}
		_, _ = fmt.Fprintf(stdout, "%8s  %s%s  %s\n", "+"+at.String(), s.Describe(), note(s), outcome)
	}}
	return r.Run(ctx, sc)
}

func note(s scenario.Step) string {
	if s.Note == "" {
		return ""
	}
	return "  (" + s.Note + ")"
}

// consoleURL is the console of the fake cloud at cloudURL, with token in the fragment the page
// reads it from (browsers never send a fragment; the token is the one this command was given,
// which the terminal shows anyway): the page then needs no typing before it shows anything.
func consoleURL(cloudURL, token string) string {
	u := strings.TrimRight(cloudURL, "/") + "/ui"
	if token == "" {
		return u
	}
	return u + "#token=" + url.QueryEscape(token)
}
