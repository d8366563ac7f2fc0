package csi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

func TestOptionsFlagsAndValidate(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyToken := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyToken, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missingToken := filepath.Join(dir, "missing")
	tests := []struct {
		name    string
		args    []string
		wantErr []string // substrings that must all be in the one error; empty means valid
	}{
		{name: "all with node id", args: []string{"--node-id=i-1"}},
		{name: "controller needs no node id", args: []string{"--mode=controller"}},
		{name: "tcp endpoint", args: []string{"--mode=controller", "--endpoint=tcp://127.0.0.1:10000"}},
		{name: "readable token file", args: []string{"--node-id=i-1", "--cloud-token-file=" + token}},
		{name: "node without node id", args: []string{"--mode=node"}, wantErr: []string{"--node-id"}},
		{name: "every problem at once", args: []string{"--mode=node", "--endpoint=http://x", "--cloud-url=ftp://x",
			"--http-addr=nope", "--quota-share=most", "--capacity-stale-after=0s", "--state-dir=rel"},
			wantErr: []string{"--node-id is required", "--endpoint", "--cloud-url", "--http-addr", "--quota-share must be none or even, got \"most\"",
				"--capacity-stale-after must be > 0", "--state-dir"}},
		{name: "every capacity, backoff and token flag at once", args: []string{"--node-id=i-1", "--capacity-max-step=-1",
			"--capacity-min-interval=0s", "--capacity-stability-window=-1s", "--capacity-max-stability-window=-2s",
			"--publish-backoff-initial=0s", "--publish-backoff-max=-1s", "--cloud-token-file=" + missingToken, "--capacity-increase-spread=-1s"},
			wantErr: []string{"--capacity-max-step must be >= 0", "--capacity-min-interval must be > 0", "--capacity-increase-spread must be >= 0",
				"--capacity-stability-window must be >= 0", "--capacity-max-stability-window (-2s) must be >= --capacity-stability-window (-1s)",
				"--publish-backoff-initial must be > 0", "--publish-backoff-max (-1s) must be >= --publish-backoff-initial (0s)",
				"--cloud-token-file: open " + missingToken}},
		{name: "stale-after below min-interval and an empty token file", args: []string{"--node-id=i-1", "--capacity-stale-after=1s",
			"--capacity-min-interval=5s", "--cloud-token-file=" + emptyToken, "--mode=node"},
			wantErr: []string{"--capacity-stale-after (1s) must be >= --capacity-min-interval (5s)", "--cloud-token-file " + emptyToken + " is empty"}},
		{name: "bad mode", args: []string{"--mode=both"}, wantErr: []string{"--mode"}},
		// Go's URL parser reads "localhost" as a scheme, and refuses the other with its own words.
		{name: "cloud url without a scheme", args: []string{"--node-id=i-1", "--cloud-url=localhost:18080"},
			wantErr: []string{`--cloud-url: "localhost:18080" has no scheme: want an http:// or https:// URL, e.g. http://127.0.0.1:8080 (did you mean "http://localhost:18080"?)`}},
		{name: "cloud url address and slash", args: []string{"--node-id=i-1", "--cloud-url=127.0.0.1:18080/"},
			wantErr: []string{`--cloud-url: "127.0.0.1:18080/" has no scheme: want an http:// or https:// URL`}},
		{name: "cloud url without a host", args: []string{"--node-id=i-1", "--cloud-url=https://"},
			wantErr: []string{`--cloud-url: "https://" has no host: want an http:// or https:// URL`}},
		{name: "short windows for e2e", args: []string{"--node-id=i-1", "--capacity-stability-window=2s", "--capacity-max-stability-window=8s",
			"--publish-backoff-initial=100ms", "--publish-backoff-max=1s"}},
		{name: "stability window above its max", args: []string{"--node-id=i-1", "--capacity-stability-window=5m"},
			wantErr: []string{"--capacity-max-stability-window (4m0s) must be >= --capacity-stability-window (5m0s)"}},
		{name: "negative stability window", args: []string{"--mode=node", "--node-id=i-1", "--capacity-stability-window=-1s"}, wantErr: []string{"--capacity-stability-window must be >= 0"}},
		{name: "publish backoff max below initial", args: []string{"--mode=controller", "--publish-backoff-initial=10s", "--publish-backoff-max=1s"},
			wantErr: []string{"--publish-backoff-max (1s) must be >= --publish-backoff-initial (10s)"}},
		{name: "node mode ignores the publish backoff", args: []string{"--mode=node", "--node-id=i-1", "--publish-backoff-initial=0s"}},
		{name: "controller mode ignores the capacity flags", args: []string{"--mode=controller", "--capacity-max-step=-1"}},
		{name: "cluster check flags", args: []string{"--mode=node", "--node-id=i-1", "--kubeconfig=" + token, "--node-name=n1", "--cluster-check-timeout=5s"}},
		{name: "bad cluster check flags", args: []string{"--mode=node", "--node-id=i-1", "--kubeconfig=" + missingToken, "--cluster-check-timeout=0s"},
			wantErr: []string{"--kubeconfig: stat " + missingToken, "--cluster-check-timeout must be > 0"}},
		{name: "controller mode ignores the cluster check flags", args: []string{"--mode=controller", "--cluster-check-timeout=0s"}},
		{name: "kubelet root", args: []string{"--mode=node", "--node-id=i-1", "--kubelet-root=/run/k/kubelet"}},
		{name: "bad kubelet roots", args: []string{"--mode=node", "--node-id=i-1", "--kubelet-root=var/lib/kubelet"}, wantErr: []string{"--kubelet-root must be a clean absolute path other than /"}},
		{name: "kubelet root not clean", args: []string{"--mode=node", "--node-id=i-1", "--kubelet-root=/var/lib/kubelet/"}, wantErr: []string{"--kubelet-root"}},
		{name: "kubelet root with dot-dot", args: []string{"--mode=all", "--node-id=i-1", "--kubelet-root=/var/lib/../kubelet"}, wantErr: []string{"--kubelet-root"}},
		{name: "kubelet root /", args: []string{"--mode=node", "--node-id=i-1", "--kubelet-root=/"}, wantErr: []string{"--kubelet-root"}},
		{name: "controller mode ignores the kubelet root", args: []string{"--mode=controller", "--kubelet-root="}},
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
				// The flag checks must not let through what the packages would refuse.
				if o.Mode != ModeController {
					if err := o.CapacityConfig().Validate(); err != nil {
						t.Errorf("Validate = nil but CapacityConfig().Validate = %v", err)
					}
				}
				if o.Mode != ModeNode {
					if err := o.PublishBackoffConfig().Validate(); err != nil {
						t.Errorf("Validate = nil but PublishBackoffConfig().Validate = %v", err)
					}
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
			// Messages name flags, never the capacity package's field terms.
			for _, bad := range []string{"capacity max-step", "capacity stale-after", "capacity min-interval", "capacity backoff"} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("error %q uses %q instead of the flag name", err, bad)
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
		"--capacity-stability-window=2s", "--capacity-max-stability-window=8s", "--publish-backoff-initial=1s", "--publish-backoff-max=3s",
		"--capacity-increase-spread=90s"}); err != nil {
		t.Fatal(err)
	}
	c := o.CapacityConfig()
	if c.StaleAfter != 3*time.Minute || c.MaxStep != 4 || c.MinInterval != 7*time.Second || c.QuotaShare != "even" || c.StatePath != "/s/capacity.json" ||
		c.StabilityWindow != 2*time.Second || c.MaxStabilityWindow != 8*time.Second || c.IncreaseSpread != 90*time.Second {
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
	if o.KubeletRoot != "/var/lib/kubelet" || NewNodeServer(NodeConfig{}).cfg.KubeletRoot != o.KubeletRoot {
		t.Errorf("default kubelet root = %q (node server: %q), want the kubelet's default /var/lib/kubelet", o.KubeletRoot, NewNodeServer(NodeConfig{}).cfg.KubeletRoot)
	}
}
