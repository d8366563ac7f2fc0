package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestFlags: the flags land in the options, the fleet's too; an unknown flag, a value of
// the wrong type and a single-dash long flag are refused naming where the flags are listed;
// --help lists them and succeeds.
func TestFlags(t *testing.T) {
	var o options
	fs := pflag.NewFlagSet("policy", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--fleet", "--fleet-nodes=10,30", "--fleet-duration=30m", "--seed=3", "--refresh=false", "--period=30s"}); err != nil {
		t.Fatal(err)
	}
	if !o.fleet.on || o.fleet.nodes != "10,30" || o.fleet.duration != 30*time.Minute || o.seed != 3 || o.refresh || o.period != 30*time.Second ||
		o.fleet.periods != "10,30,60" || o.nodes != defaultParams().Nodes {
		t.Errorf("options %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus (policy --help lists the flags)"},
		{[]string{"--nodes=many"}, `invalid argument "many" for "--nodes" flag`},
		{[]string{"-fleet"}, "unknown shorthand flag: 'f' in -fleet (policy --help lists the flags)"},
		{[]string{"extra"}, `unknown command "extra" for "policy"`},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() > 0 {
			t.Errorf("%q: %v, output %q; want an error containing %q and no output", tc.args, err, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); err != nil || !strings.Contains(out.String(), "--fleet-json string") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
}
