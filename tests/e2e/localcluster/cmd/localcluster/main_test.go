package main

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
)

func TestIsServe(t *testing.T) {
	// A stand-in whose command line holds the serve arguments, as `up` starts them.
	// It prints a line once it runs, so that /proc shows its command line, not the
	// forked test binary's, and exits when its stdin closes.
	cmd := exec.Command("/bin/sh", "-c", "echo started; read -r _", "serve", "--run-dir=/tmp/run-a")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("stand-in did not start: %v", err)
	}
	for _, tc := range []struct {
		name   string
		pid    int
		runDir string
		want   bool
	}{
		{"serve of this run folder", cmd.Process.Pid, "/tmp/run-a", true},
		{"serve of another run folder", cmd.Process.Pid, "/tmp/run-b", false},
		{"a pid reused by another program", os.Getpid(), "/tmp/run-a", false},
		{"no such process", 1 << 30, "/tmp/run-a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isServe(tc.pid, tc.runDir); got != tc.want {
				t.Fatalf("isServe(%d, %q) = %v, want %v", tc.pid, tc.runDir, got, tc.want)
			}
		})
	}
}
