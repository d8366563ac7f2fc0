package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "kubelet.conf")
	if err := os.WriteFile(garbage, []byte("not: [a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for a clean nil return
	}{
		{name: "bad node name", args: []string{"--node-name=Kind_Worker"}, wantErr: "invalid flags: --node-name"},
		{name: "relative conf dir", args: []string{"--node-name=n", "--cni-conf-dir=net.d"}, wantErr: "--cni-conf-dir"},
		{name: "stray argument", args: []string{"--node-name=n", "extra"}, wantErr: "unexpected arguments"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "unknown flag: --nope"},
		{name: "kubeconfig that does not load", args: []string{"--node-name=n", "--admin-kubeconfig=", "--kubeconfig=" + garbage}, wantErr: "load kubeconfig " + garbage},
		{name: "klog flag", args: []string{"--node-name=n", "-v=9", "--kubeconfig=" + filepath.Join(dir, "never"), "--resync=x"}, wantErr: `invalid argument "x" for "--resync" flag`},
		{name: "help", args: []string{"--help"}},
		// Still waiting for the kubeconfig when stopped: a clean exit, not an error.
		{name: "stopped while waiting", args: []string{"--node-name=n", "--kubeconfig=" + filepath.Join(dir, "never")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := run(ctx, tt.args)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("run: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("run: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
