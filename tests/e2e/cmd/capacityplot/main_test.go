package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/tests/e2e/capacityplot"
)

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"nothing to reach", []string{"--kubeconfig="}, []string{"--kubeconfig (or --run-dir) is required", "--cloud-url (or --run-dir) is required"}},
		{"every problem at once", []string{"--kubeconfig=k", "--cloud-url=http://127.0.0.1:1", "--duration=0s", "--interval=1ms", "--quota-share=half", "--driver="},
			[]string{"--duration must be > 0", "interval must be ≥ 100ms", "quota share must be none or even", "driver name is required"}},
		{"a cloud URL without a scheme", []string{"--kubeconfig=k", "--cloud-url=localhost:18080"},
			[]string{`--cloud-url: "localhost:18080" has no scheme: want an http:// or https:// URL, e.g. http://127.0.0.1:8080`}},
		{"bad plugin URL", []string{"--plugin-url=node-1"}, []string{"expected NODE=URL"}},
		{"stray argument", []string{"--kubeconfig=k", "extra"}, []string{"unexpected arguments [extra]"}},
		{"bad scenario", []string{"--scenario=../../../../examples/seed.yaml"}, []string{"seed.yaml: scenario: ", "unknown field"}},
		{"bad instance map", []string{"--scenario=../../../../examples/scenarios/stale-count.yaml", "--map-instance=x"}, []string{"want FROM=TO"}},
		{"missing run dir", []string{"--run-dir=" + filepath.Join(os.TempDir(), "no-such-capacityplot-run")}, []string{"read cluster info"}},
		{"a recording and a scenario", []string{"--from-recording=x.json", "--scenario=../../../../examples/scenarios/stale-count.yaml"},
			[]string{"--from-recording draws an earlier run: it takes no --scenario"}},
		{"a recording that is not one", []string{"--from-recording=../../../../examples/seed.yaml", "--out-dir=" + os.TempDir()},
			[]string{"seed.yaml: capacity recording: invalid character"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", "")
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut)
			if err == nil {
				t.Fatalf("expected an error for %v", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestPluginURLs(t *testing.T) {
	var p pluginURLs
	for _, s := range []string{"node-1=http://127.0.0.1:9808", "node-2=http://127.0.0.1:9809", "node-1=http://127.0.0.1:9810"} {
		if err := p.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if len(p) != 2 || p["node-1"] != "http://127.0.0.1:9810" || p["node-2"] != "http://127.0.0.1:9809" {
		t.Errorf("expected the last URL per node, got %v", p)
	}
}

func TestCompleteFromRunDir(t *testing.T) {
	dir := t.TempDir()
	info := `{"kubeconfig":"/run/kc","cloudURL":"http://127.0.0.1:1","adminToken":"tok",` +
		`"pluginURLs":{"node-1":"http://127.0.0.1:2","node-2":"http://127.0.0.1:3"}}`
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte(info), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want pluginURLs
	}{
		{"from the run folder", nil, pluginURLs{"node-1": "http://127.0.0.1:2", "node-2": "http://127.0.0.1:3"}},
		{"flags win", []string{"--plugin-url=node-1=http://127.0.0.1:9"}, pluginURLs{"node-1": "http://127.0.0.1:9"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", "")
			var o options
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--run-dir=" + dir}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := o.complete(); err != nil {
				t.Fatal(err)
			}
			if o.Kubeconfig != "/run/kc" || o.CloudURL != "http://127.0.0.1:1" || o.CloudToken != "tok" {
				t.Errorf("connection from cluster.json: got kubeconfig %q, cloud %q, token %q", o.Kubeconfig, o.CloudURL, o.CloudToken)
			}
			if !maps.Equal(o.PluginURLs, tc.want) {
				t.Errorf("plugin URLs = %v, want %v", o.PluginURLs, tc.want)
			}
		})
	}
}

// TestFromRecording draws docs/local-cluster.md's recording again, without a cluster, into a new folder.
func TestFromRecording(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "replot")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"--from-recording=../../../../docs/capacity-plot.json", "--out-dir=" + dir}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{capacityplot.PlotFile, capacityplot.SummaryFile, capacityplot.RecordingFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("expected %s: %v", f, err)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, capacityplot.PlotFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("S12 churn")) || !strings.Contains(out.String(), "drew ../../../../docs/capacity-plot.json again") {
		t.Errorf("expected the S12 page and a line saying so, got %q", out.String())
	}
}

// TestFlags: the flags land in the options (repeatable ones in order, --map-instance never
// split at commas); an unknown flag and a bad value are refused naming --help, which lists
// the flags and succeeds.
func TestFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "/env/kc")
	var o options
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--cloud-url=http://c", "--duration=10m", "--plugin-url=n1=http://a", "--plugin-url=n2=http://b",
		"--map-instance=a=b,c", "--map-instance=d=e", "--scenario=s.yaml", "--out-dir=plots"}); err != nil {
		t.Fatal(err)
	}
	if o.Kubeconfig != "/env/kc" || o.CloudURL != "http://c" || o.Duration != 10*time.Minute || o.Interval != 2*time.Second || o.Tail != time.Minute ||
		!maps.Equal(o.PluginURLs, pluginURLs{"n1": "http://a", "n2": "http://b"}) || strings.Join(o.MapInstance, "|") != "a=b,c|d=e" ||
		o.Scenario != "s.yaml" || o.OutDir != "plots" || o.QuotaShare != "none" {
		t.Errorf("options %+v", o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus (capacityplot --help lists the flags)"},
		{[]string{"--duration=long"}, `invalid argument "long" for "--duration" flag`},
		{[]string{"-duration=1m"}, "unknown shorthand flag: 'd' in -duration=1m"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), tc.args, &out, &out); err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() > 0 {
			t.Errorf("%q: %v, output %q; want an error containing %q", tc.args, err, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); err != nil || !strings.Contains(out.String(), "--plugin-url NODE=URL") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
}
