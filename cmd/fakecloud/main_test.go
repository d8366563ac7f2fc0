package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // substrings of the error; empty means valid
	}{
		{"defaults need a tokens file", nil, []string{"--tokens-file"}},
		{"demo", []string{"--auth=none"}, nil},
		{"tokens", []string{"--tokens-file=t.yaml"}, nil},
		{"all problems at once", []string{"--auth=magic", "--max-body-bytes=0", "--listen=", "--auto-register", "--default-zone="},
			[]string{"--auth=\"magic\"", "--max-body-bytes", "--listen", "--default-zone"}},
		{"tokens file with no auth", []string{"--auth=none", "--tokens-file=t.yaml"}, []string{"ignored"}},
		{"bounds set", []string{"--auth=none", "--max-connections=10", "--read-header-timeout=1s", "--read-timeout=2s",
			"--idle-timeout=5s", "--max-fault-rules=5", "--max-events=100", "--max-event-bytes=65536"}, nil},
		{"every bound refused at once", []string{"--auth=none", "--max-connections=0", "--read-header-timeout=0s", "--read-timeout=-1s",
			"--idle-timeout=0s", "--max-fault-rules=-1", "--max-events=0", "--max-event-bytes=10", "--max-waits=-1"},
			[]string{"--max-connections", "--read-header-timeout", "--read-timeout", "--idle-timeout", "--max-fault-rules", "--max-events",
				"--max-event-bytes must hold one event", "--max-waits must be >= 0"}},
		// Waits that may hold every connection leave none for what would end them (a newcomer
		// saw /readyz and GET /v1/quotas time out with --max-connections=10 --max-waits=20).
		{"waits as many as the connections", []string{"--auth=none", "--max-connections=10", "--max-waits=10"},
			[]string{"--max-waits must be below --max-connections (10), got 10"}},
		{"waits below the connections", []string{"--auth=none", "--max-connections=10", "--max-waits=9"}, nil},
		{"transition durations out of range", []string{"--auth=none", "--attach-duration=-1s", "--detach-duration=2h"},
			[]string{"--attach-duration must be in [0, 1h0m0s]", "--detach-duration"}},
		{"synchronous transitions", []string{"--auth=none", "--attach-duration=0s", "--detach-duration=0s"}, nil},
		{"header timeout above read timeout", []string{"--auth=none", "--read-header-timeout=20s", "--read-timeout=10s"},
			[]string{"longer than --read-timeout"}},
		{"console nodes", []string{"--auth=none", "--console-node=node-a1=http://127.0.0.1:9809", "--console-node=node-a2=http://127.0.0.1:9810/"}, nil},
		{"cluster view of another driver", []string{"--auth=none", "--console-driver=other.csi.example"}, nil},
		{"bad console driver", []string{"--auth=none", "--console-driver=not a driver!"}, []string{"--console-driver", "CSI driver name"}},
		{"bad console nodes, all reported", []string{"--auth=none", "--console-node=node-a1", "--console-node=n=ftp://x",
			"--console-node=m=http://h:1", "--console-node=m=http://h:2"},
			[]string{"want NAME=URL", "ftp://x", `"m" given twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o Options
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %v", tt.args)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestBoundFlagsHaveDefaultsAndReachTheConfig: every bound is a flag whose default is the
// server's documented default, and the values reach server.Config.
func TestBoundFlagsHaveDefaultsAndReachTheConfig(t *testing.T) {
	var o Options
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	for name, want := range map[string]string{"max-connections": "1024", "read-header-timeout": "5s", "read-timeout": "10s",
		"idle-timeout": "2m0s", "max-fault-rules": "1000", "max-instances": "10000", "max-events": "10000", "max-event-bytes": "4194304", "max-body-bytes": "1048576",
		"attach-duration": "300ms", "detach-duration": "300ms", "max-heavy-reads": "4", "max-waits": "0", "metrics-open": "false"} {
		f := fs.Lookup(name)
		if f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want default %s", name, f, want)
		}
	}
	if err := fs.Parse([]string{"--auth=none", "--max-connections=7", "--read-timeout=3s", "--max-fault-rules=9", "--max-heavy-reads=2", "--max-waits=3", "--metrics-open"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConnections != 7 || cfg.ReadTimeout != 3*time.Second || cfg.MaxFaultRules != 9 || cfg.MaxEvents != 10000 ||
		cfg.MaxHeavyReads != 2 || cfg.MaxWaits != 3 || !cfg.MetricsOpen {
		t.Fatalf("config %+v", cfg)
	}
	if err := fs.Parse([]string{"--console-node=node-a1=http://127.0.0.1:9809/"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.Config(); err != nil {
		t.Fatal(err)
	}
	if n := cfg.Console.Nodes; len(n) != 1 || n[0].Name != "node-a1" || n[0].URL != "http://127.0.0.1:9809" {
		t.Fatalf("console nodes %+v, want node-a1 at http://127.0.0.1:9809", n)
	}
	if cfg.Console.Kube != nil {
		t.Fatal("a cluster client without --console-kubeconfig")
	}
	// --console-kubeconfig: a kubeconfig that is not there is Config's error; one that is
	// gives the console a client (no connection is made yet).
	if err := fs.Parse([]string{"--console-kubeconfig=" + filepath.Join(t.TempDir(), "none")}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), "--console-kubeconfig") {
		t.Fatalf("Config with a missing kubeconfig: %v", err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--console-kubeconfig=" + kc}); err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.Config(); err != nil || cfg.Console.Kube == nil || cfg.Console.DriverName != "disk.fakecloud.dev" {
		t.Fatalf("Config with a kubeconfig: %v, client %v, driver %q", err, cfg.Console.Kube != nil, cfg.Console.DriverName)
	}
}

// TestHelpStatesTheFixedBounds: --help lists the bounds no flag changes.
func TestHelpStatesTheFixedBounds(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--max-connections", "1-128 bytes", "at most 1000", "60000 ms in total", "--max-fault-rules"} {
		if !strings.Contains(strings.ReplaceAll(out.String(), "  -", "  --"), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestUsageEndsWithBoundsOnTheServerOnly: the server's usage (and that of the commands
// without their own, version) ends with the fixed bounds once, after cobra's usage text;
// scenario and seed print cobra's usage alone. The usage is a function, not a template, so
// that text/template stays out of the binary (issue 28); the text is what it was.
func TestUsageEndsWithBoundsOnTheServerOnly(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		bounds bool
	}{
		{[]string{"--help"}, true},
		{[]string{"version", "--help"}, true},
		{[]string{"scenario", "--help"}, false},
		{[]string{"seed", "--help"}, false},
		{[]string{"seed", "instances", "--help"}, false},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), tc.args, &out, &out); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			if !strings.Contains(text, "Usage:\n") || !strings.Contains(text, "Flags:\n") {
				t.Errorf("no cobra usage text:\n%s", text)
			}
			if n := strings.Count(text, "Fixed bounds"); n != map[bool]int{true: 1, false: 0}[tc.bounds] {
				t.Errorf("%d \"Fixed bounds\" sections, want bounds %v:\n%s", n, tc.bounds, text)
			}
			if tc.bounds && !strings.HasSuffix(text, fixedBounds()) {
				t.Errorf("the usage does not end with the bounds:\n%s", text)
			}
		})
	}
}

// TestCompletion: cobra's completion command, for the fake cloud as for the driver; the
// scenario command completes YAML files.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"completion", shell}, &out, &out); err != nil || !strings.Contains(out.String(), "fakecloud") {
			t.Errorf("completion %s: %v, %d bytes", shell, err, out.Len())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"__complete", "scenario", ""}, &out, &out); err != nil || !strings.Contains(out.String(), "yaml") {
		t.Errorf("completing scenario's FILE: %v\n%s", err, out.String())
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "fakecloud ") {
			t.Fatalf("%v printed %q", args, out.String())
		}
	}
}

func TestRunRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	badSeed := filepath.Join(dir, "seed.yaml")
	if err := os.WriteFile(badSeed, []byte("instances:\n- id: n\n  zone: z\n  instanceType: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("instanceTypo: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badTokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(badTokens, []byte("tokens:\n- token: x\n  role: root\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--auth=none", "--seed=" + badSeed},
		{"--auth=none", "--seed=" + typo},
		{"--tokens-file=" + badTokens},
		{"--auth=none", "--auto-register", "--default-instance-type=huge"},
		{"--auth=none", "extra-arg"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), append(args, "--listen=127.0.0.1:0"), &out, &out); err == nil {
			t.Errorf("run(%v) succeeded", args)
		}
	}
}

// TestRunServesExamplesAndStopsCleanly starts the binary's run with the example files and a
// data dir, uses it, and cancels it.
func TestRunServesExamplesAndStopsCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a tiny window for another process to take the port; acceptable in tests
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--listen=" + addr, "--data-dir=" + t.TempDir(), "--seed=../../examples/seed.yaml",
			"--tokens-file=../../examples/tokens.yaml"}, &out, &out)
	}()
	c, err := admin.NewClient("http://"+addr, cloud.WithToken("demo-driver-token"))
	if err != nil {
		t.Fatal(err)
	}
	var capErr error
	for range 100 {
		var resp *http.Response
		if resp, capErr = http.Get("http://" + addr + "/readyz"); capErr == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if capErr != nil {
		t.Fatalf("server never became ready: %v", capErr)
	}
	types, err := c.ListInstanceTypes(context.Background())
	if err != nil || len(types) != 3 {
		t.Fatalf("instance types %v, %v", types, err)
	}
	instances, err := c.ListInstances(context.Background())
	if err != nil || len(instances) != 3 {
		t.Fatalf("instances %v, %v", instances, err)
	}
	zones := map[string]bool{}
	for _, in := range instances {
		zones[in.Zone] = true
		if in.OutOfBandSlots != 1 {
			t.Errorf("instance %s has %d out-of-band slots, want 1", in.ID, in.OutOfBandSlots)
		}
	}
	if len(zones) != 2 {
		t.Errorf("zones %v, want 2", zones)
	}
	q, err := c.GetQuotas(context.Background())
	if err != nil || q.Attachments.Limit != 40 || q.Volumes.Limit != 100 || q.CapacityBytes.Limit != 1<<40 {
		t.Fatalf("quotas %+v, %v", q, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
