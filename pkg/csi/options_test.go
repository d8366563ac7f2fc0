package csi

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

func TestOptionsFlagsAndValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr []string // substrings; empty means valid
	}{
		{name: "all with node id", args: []string{"--node-id=i-1"}},
		{name: "controller needs no node id", args: []string{"--mode=controller"}},
		{name: "tcp endpoint", args: []string{"--mode=controller", "--endpoint=tcp://127.0.0.1:10000"}},
		{name: "node without node id", args: []string{"--mode=node"}, wantErr: []string{"--node-id"}},
		{name: "every problem at once", args: []string{"--mode=node", "--endpoint=http://x", "--cloud-url=ftp://x",
			"--http-addr=nope", "--quota-share=most", "--capacity-stale-after=0s", "--state-dir=rel"},
			wantErr: []string{"--node-id", "--endpoint", "--cloud-url", "--http-addr", "quota-share", "stale-after", "--state-dir"}},
		{name: "bad mode", args: []string{"--mode=both"}, wantErr: []string{"--mode"}},
		{name: "short windows for e2e", args: []string{"--node-id=i-1", "--capacity-stability-window=2s", "--capacity-max-stability-window=8s",
			"--publish-backoff-initial=100ms", "--publish-backoff-max=1s"}},
		{name: "stability window above its max", args: []string{"--node-id=i-1", "--capacity-stability-window=5m"}, wantErr: []string{"max-stability-window"}},
		{name: "negative stability window", args: []string{"--mode=node", "--node-id=i-1", "--capacity-stability-window=-1s"}, wantErr: []string{"stability-window must be >= 0"}},
		{name: "publish backoff max below initial", args: []string{"--mode=controller", "--publish-backoff-initial=10s", "--publish-backoff-max=1s"}, wantErr: []string{"--publish-backoff"}},
		{name: "node mode ignores the publish backoff", args: []string{"--mode=node", "--node-id=i-1", "--publish-backoff-initial=0s"}},
		{name: "relative unix socket", args: []string{"--mode=controller", "--endpoint=unix://csi.sock"}, wantErr: []string{"--endpoint"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			fs := pflag.NewFlagSet("driver", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil, want errors")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestOptionsCapacityConfig(t *testing.T) {
	var o Options
	fs := pflag.NewFlagSet("driver", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--capacity-stale-after=3m", "--capacity-max-step=4", "--capacity-min-interval=7s", "--quota-share=even", "--state-dir=/s",
		"--capacity-stability-window=2s", "--capacity-max-stability-window=8s", "--publish-backoff-initial=1s", "--publish-backoff-max=3s"}); err != nil {
		t.Fatal(err)
	}
	c := o.CapacityConfig()
	if c.StaleAfter != 3*time.Minute || c.MaxStep != 4 || c.MinInterval != 7*time.Second || c.QuotaShare != "even" || c.StatePath != "/s/capacity.json" ||
		c.StabilityWindow != 2*time.Second || c.MaxStabilityWindow != 8*time.Second {
		t.Errorf("CapacityConfig = %+v", c)
	}
	b := o.PublishBackoffConfig()
	if b.CapacityInitial != time.Second || b.CapacityMax != 3*time.Second || b.RetryableMax != backoff.DefaultConfig().RetryableMax {
		t.Errorf("PublishBackoffConfig = %+v", b)
	}
}

func TestDefaultOptionsMatchThePackageDefaults(t *testing.T) {
	o := DefaultOptions()
	o.StateDir = ""
	if got, want := o.CapacityConfig(), capacity.DefaultConfig(); got != want {
		t.Errorf("default CapacityConfig = %+v, want %+v", got, want)
	}
	if got, want := o.PublishBackoffConfig(), backoff.DefaultConfig(); got != want {
		t.Errorf("default PublishBackoffConfig = %+v, want %+v", got, want)
	}
}
