package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"bad plugin URL", []string{"--plugin-url=node-1"}, []string{"expected NODE=URL"}},
		{"stray argument", []string{"--kubeconfig=k", "extra"}, []string{"unexpected arguments [extra]"}},
		{"missing run dir", []string{"--run-dir=" + filepath.Join(os.TempDir(), "no-such-capacityplot-run")}, []string{"read cluster info"}},
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
