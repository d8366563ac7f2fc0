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

	"github.com/fakecloud/fakecloud-csi/internal/plural"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
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
	// ProgressEvery is how often a line says what the run waits for (hidden; tests
	// shorten it).
	ProgressEvery time.Duration
	// SettleTimeout bounds the wait for a settled fleet before the first step
	// (scenario.Settler); 0 skips it.
	SettleTimeout time.Duration
}

// DefaultSettleTimeout is --settle-timeout's default: longer than the 4 minutes after an
// increase during which a decrease counts as a flap (--capacity-max-stability-window), shorter
// than the 12 minutes one level of flap damping takes to decay (restarting the plugins is
// quicker then).
const DefaultSettleTimeout = 10 * time.Minute

// checkTimeout bounds the check of the cloud and token before the first step.
const checkTimeout = 10 * time.Second

// minProgressEvery bounds --progress-every from below: a line per 100 ms is already a flood.
const minProgressEvery = 100 * time.Millisecond

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
	cmd.SetUsageFunc(cobraUsage())
	fs := cmd.Flags()
	fs.StringVar(&o.CloudURL, "cloud-url", "http://127.0.0.1:8080", "the fake cloud to drive")
	fs.StringVar(&o.Token, "cloud-token", "", "admin bearer token (make run's: demo-admin-token)")
	fs.StringVar(&o.TokenFile, "cloud-token-file", "", "file holding the admin bearer token (make up-local prints it)")
	// The names before every flag about the fake cloud began with --cloud- (as the driver's
	// --cloud-url and --cloud-token-file do): still read, with a warning.
	fs.StringVar(&o.Token, "token", "", "")
	fs.StringVar(&o.TokenFile, "token-file", "", "")
	_ = fs.MarkDeprecated("token", "use --cloud-token")
	_ = fs.MarkDeprecated("token-file", "use --cloud-token-file")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print the timeline, quota noise expanded, and call nothing")
	fs.DurationVar(&o.ProgressEvery, "progress-every", scenario.DefaultProgressEvery, "how often to say what the run waits for")
	_ = fs.MarkHidden("progress-every")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", DefaultSettleTimeout,
		"before the first step, wait at most this long for the fleet to settle: every node plugin the fake cloud relays (--console-node) in mode fresh with no flap damping left from earlier runs, "+
			"no fault rule with an expiry live; 0: start at once (the outcome may then differ from the file's header)")
	fs.Func("map-instance", "FROM=TO: run the file's steps for instance FROM on TO (e.g. node-a2=node-1 on make up-local); repeatable", func(v string) error {
		o.MapInstance = append(o.MapInstance, v)
		return nil
	})
	return cmd
}

// Validate reports every problem of the flags at once (the file is checked when it is read).
func (o scenarioOptions) Validate() error {
	var errs []error
	if err := cloud.CheckBaseURL(o.CloudURL); err != nil {
		errs = append(errs, fmt.Errorf("--cloud-url: %w", err))
	}
	if o.Token != "" && o.TokenFile != "" {
		errs = append(errs, errors.New("--cloud-token and --cloud-token-file are exclusive"))
	}
	if o.SettleTimeout < 0 || o.SettleTimeout > scenario.MaxOffset {
		errs = append(errs, fmt.Errorf("--settle-timeout must be in [0, %v], got %v", scenario.MaxOffset, o.SettleTimeout))
	}
	if o.ProgressEvery < minProgressEvery {
		errs = append(errs, fmt.Errorf("--progress-every must be at least %v, got %v", minProgressEvery, o.ProgressEvery))
	}
	return errors.Join(errs...)
}

// skipSettle is how to start without waiting for a settled fleet, said before the wait.
const skipSettle = "--settle-timeout=0 (make scenario SCENARIO_ARGS=--settle-timeout=0) starts at once, " +
	"but the outcome may then differ from the file's header"

// runScenario runs the timeline of file with o.
func runScenario(ctx context.Context, o scenarioOptions, file string, stdout io.Writer) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	sc, err := loadScenario(file, o.MapInstance)
	if err != nil {
		return err
	}
	say := func(format string, args ...any) { _, _ = fmt.Fprintf(stdout, format+"\n", args...) }
	say("%s", scenarioHeader(sc))
	for _, w := range sc.Warnings {
		say("warning: %s", w)
	}
	if sc.Expect != "" {
		say("expect: %s", sc.Expect)
	}
	if o.DryRun {
		for _, s := range sc.Steps {
			say("%8s  %s%s", "+"+time.Duration(s.At).String(), s.Describe(), note(s))
		}
		return nil
	}
	client, token, err := o.client()
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if err := checkCloud(ctx, client, o.CloudURL, token); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	say("driving %s; every step is also in GET /v1/events and the console: %s", o.CloudURL, consoleURL(o.CloudURL, token))
	unsettled, err := settle(ctx, o, client, say)
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	ran, failed := 0, 0
	r := scenario.Runner{API: client, ProgressEvery: o.ProgressEvery,
		Report: func(at time.Duration, s scenario.Step, err error) {
			ran++
			outcome := "ok"
			if err != nil {
				failed++
				outcome = "FAILED: " + err.Error()
			}
			say("%8s  %s%s  %s", "+"+at.String(), s.Describe(), note(s), outcome)
		},
		Waiting: func(next scenario.Step, at, in time.Duration) {
			say("%8s  next step '%s' at t=%v, in %v", "", next.Describe(), at, roundWait(in))
		}}
	err = r.Run(ctx, sc)
	// The last step is not the outcome: increases land a stability window and a ramp later,
	// so say so instead of ending silently at the last step.
	say("scenario %s: %d of %s ran, %d failed", sc.Name, ran, plural.Of(len(sc.Steps), "step", "steps"), failed)
	if sc.Expect != "" && ctx.Err() == nil {
		say("expected: %s\n(increases land a stability window and a ramp after their step: keep watching bin/driver watch or the console)", sc.Expect)
		if unsettled {
			say("(the plugins were not settled at the start, see above: increases land later than expected)")
		}
	}
	return err
}

// loadScenario reads and checks file, then renames its instances by mapInstance
// (--map-instance FROM=TO pairs).
func loadScenario(file string, mapInstance []string) (*scenario.Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	sc, err := scenario.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	m, err := scenario.ParseInstanceMap(mapInstance)
	if err != nil {
		return nil, fmt.Errorf("scenario: --map-instance: %w", err)
	}
	sc.MapInstances(m)
	return sc, nil
}

// client is the fake cloud client of o, with its token (--cloud-token, or --cloud-token-file's content).
func (o scenarioOptions) client() (*admin.Client, string, error) {
	token := o.Token
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return nil, "", err
		}
		token = strings.TrimSpace(string(b))
	}
	var opts []cloud.Option
	if token != "" {
		opts = append(opts, cloud.WithToken(token))
	}
	c, err := admin.NewClient(o.CloudURL, opts...)
	return c, token, err
}

// settle waits, at most o.SettleTimeout, for a settled fleet before the first step, saying up
// front how long and why; with 0 it looks at the fleet once instead. unsettled says that the
// run starts on a fleet that is not settled (or could not be read).
func settle(ctx context.Context, o scenarioOptions, client *admin.Client, say func(string, ...any)) (unsettled bool, err error) {
	st := scenario.Settler{Fleet: client, Every: o.ProgressEvery, Timeout: o.SettleTimeout, Skip: skipSettle,
		Report: func(msg string) { say("%s", msg) }}
	if o.SettleTimeout == 0 {
		return lookAtFleet(ctx, &st, say), nil
	}
	if err := st.Wait(ctx); err != nil {
		return false, err
	}
	say("the fleet is settled: starting")
	return false, nil
}

// lookAtFleet, for a run that starts without waiting (--settle-timeout=0), reads the fleet
// once and prints each node plugin's state (the wording of a wait: reported value, mode,
// stability window, and settled or for how long not) and, when they are not settled, how the
// outcome will differ from the file's header (the header assumes settled plugins: a damped
// window delays every increase by that window). It reports whether the fleet was not
// settled (or could not be read).
func lookAtFleet(ctx context.Context, st *scenario.Settler, say func(string, ...any)) bool {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	fl, err := st.Look(ctx)
	if err != nil {
		say("--settle-timeout=0: starting without knowing whether the plugins are settled (%v); the outcome in the file's header assumes they are", err)
		return true
	}
	for _, l := range fl.Lines {
		say("  %s", l)
	}
	switch {
	case fl.Plugins == 0:
		say("--settle-timeout=0: the fake cloud relays no node plugin (fakecloud --console-node): starting without knowing whether the plugins are settled; the outcome in the file's header assumes they are")
		return true
	case fl.Settled:
		say("--settle-timeout=0: the fleet is settled: starting")
		return false
	}
	say("--settle-timeout=0: starting although the fleet is not settled (above)")
	say("the expected outcome assumes settled plugins, so here increases land later than it says: a plugin still ramping finishes that first, one with flap damping waits its longer window (above) before each increase, and a decrease that undoes a recent increase doubles the window (flap damping); for the header's timeline restart the node plugins (make run: Ctrl-C, then RUN_DIR=<its folder> make run) or leave out --settle-timeout=0")
	return true
}

// checkCloud makes one cheap authenticated call (GET /v1/quotas) before the first step, so
// that a wrong URL or token fails at once, saying which, instead of at every step. It cannot
// see the token's role (every GET is a reader's): a token that is not an admin's stops the
// run at its first step (scenario.AuthError).
func checkCloud(ctx context.Context, c *admin.Client, cloudURL, token string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	_, err := c.GetQuotas(ctx)
	var ce *cloud.Error
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ce):
		return fmt.Errorf("cannot reach a fake cloud at %s (--cloud-url; is it running? make run prints its URL): %w", cloudURL, err)
	case (ce.Code == cloud.CodeUnauthenticated || ce.Code == cloud.CodeAccessDenied) && token == "":
		return fmt.Errorf("no token given, and the fake cloud at %s wants one (%d %s): pass an admin token with --cloud-token or --cloud-token-file (make run's is demo-admin-token)",
			cloudURL, ce.HTTPStatus, ce.Code)
	case ce.Code == cloud.CodeUnauthenticated || ce.Code == cloud.CodeAccessDenied:
		return fmt.Errorf("token rejected (%d %s: %s) by the fake cloud at %s: pass an admin token of its tokens file with --cloud-token or --cloud-token-file",
			ce.HTTPStatus, ce.Code, ce.Message, cloudURL)
	default:
		return fmt.Errorf("%s does not answer GET /v1/quotas as a fake cloud (%d %w); check --cloud-url", cloudURL, ce.HTTPStatus, ce)
	}
}

// roundWait rounds a wait for a progress line: whole seconds from 2 s on, tenths below.
func roundWait(d time.Duration) time.Duration {
	if d >= 2*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
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

// scenarioHeader is the first line of `fakecloud scenario`: "scenario NAME: DESCRIPTION (N
// steps over D)", without the ": DESCRIPTION" when the file has none (it left a double
// space).
func scenarioHeader(sc *scenario.Scenario) string {
	head := "scenario " + sc.Name
	if sc.Description != "" {
		head += ": " + sc.Description
	}
	return fmt.Sprintf("%s (%s over %v)", head, plural.Of(len(sc.Steps), "step", "steps"), sc.Duration())
}
