package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An in-place kubelet upgrade: RestartKubelet stops node-1's kubelet and starts it from the
// new binary with the same flags (root dir, name); a bad binary or an unknown node changes
// nothing.
func TestRestartKubeletSwapsBinary(t *testing.T) {
	dir := t.TempDir()
	s, err := newSupervisor(filepath.Join(dir, "logs"), filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.stopAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	script := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	v135 := script("kubelet-v1.35", "echo kubelet v1.35 \"$@\"; exec sleep 60")
	v136 := script("kubelet-v1.36", "echo kubelet v1.36 \"$@\"; exec sleep 60")
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := s.start(ctx, procSpec{Name: "kubelet-node-1", Path: v135, Args: []string{"--root-dir=/r/node-1"}, Restart: true, Node: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{sup: s, runCtx: ctx}
	waitLog := func(want ...string) {
		t.Helper()
		logOf := func() string { data, _ := os.ReadFile(p.logPath); return string(data) }
		waitFor(t, fmt.Sprintf("log has %q", want), func() bool {
			log := logOf()
			for _, w := range want {
				if !strings.Contains(log, w) {
					return false
				}
			}
			return true
		}, func() string { return "log:\n" + logOf() })
	}
	waitLog("kubelet v1.35 --root-dir=/r/node-1")

	for _, tc := range []struct{ node, binary, want string }{
		{"node-1", notExec, "not an executable file"},
		{"node-1", filepath.Join(dir, "missing"), "not an executable file"},
		{"node-9", v136, "no component kubelet-node-9"},
	} {
		err := c.RestartKubelet(ctx, tc.node, tc.binary)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RestartKubelet(%s, %s) = %v, want an error with %q", tc.node, filepath.Base(tc.binary), err, tc.want)
		}
	}
	if !p.running() {
		t.Fatal("a refused restart stopped the kubelet")
	}
	if got, _ := c.KubeletBinary("node-1"); got != v135 {
		t.Fatalf("binary after refused restarts = %s, want %s", got, v135)
	}

	if err := c.RestartKubelet(ctx, "node-1", v136); err != nil {
		t.Fatalf("RestartKubelet to v1.36: %v", err)
	}
	if got, _ := c.KubeletBinary("node-1"); got != v136 {
		t.Errorf("binary after the upgrade = %s, want %s", got, v136)
	}
	// The same flags (root dir) for the new binary.
	waitLog("kubelet v1.36 --root-dir=/r/node-1")
	if !p.running() {
		t.Error("the upgraded kubelet is not running")
	}
}
