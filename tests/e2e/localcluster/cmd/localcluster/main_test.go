package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
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

// TestFlags: every subcommand takes every flag, given before or after it, into the options;
// up hands serve the ones given (but --run-dir, which it passes absolute).
func TestFlags(t *testing.T) {
	var o options
	root := newCommand(&o, &bytes.Buffer{}, &bytes.Buffer{})
	args := []string{"--nodes=5", "up", "--private", "-v", "6", "--run-dir=r", "--driver-args=--a=1 --b", "--kubelet-version=v1.36.1"}
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.Name() != "up" {
		t.Fatalf("Find(%q) = %v, %v", args, cmd, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	if o.Nodes != 5 || !o.Private || o.Verbosity != 6 || o.RunDir != "r" || o.DriverArgs != "--a=1 --b" || o.KubeletVersion != "v1.36.1" || o.Force {
		t.Errorf("options %+v", o)
	}
	got := strings.Join(changedFlags(cmd.Flags()), " ")
	if want := "--driver-args=--a=1 --b --kubelet-version=v1.36.1 --nodes=5 --private=true --v=6"; got != want {
		t.Errorf("flags handed to serve %q, want %q", got, want)
	}
}

// TestRefused: no subcommand, an unknown one, an unknown flag, a bad value and a value out
// of bounds fail before anything runs, with a message saying what to do (main exits 1).
// --help lists the subcommands (serve, up's helper, is hidden) and succeeds.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: localcluster build|build-upstream|up|down|run|serve [flags]"},
		{[]string{"start"}, `unknown command "start" for "localcluster"`},
		{[]string{"up", "--bogus"}, "unknown flag: --bogus (localcluster up --help lists the flags)"},
		{[]string{"up", "--nodes=three"}, `invalid argument "three" for "--nodes" flag`},
		{[]string{"run", "--nodes=0", "--v=-1"}, "--nodes must be 1..20, got 0\n--v must be ≥ 0, got -1"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() > 0 {
			t.Errorf("%q: %v, stdout %q; want an error containing %q", tc.args, err, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n  build ", "\n  build-upstream ", "\n  up ", "\n  down ", "\n  run ", "--private", "-v, --v int"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "\n  serve ") {
		t.Errorf("--help lists the hidden serve:\n%s", out.String())
	}
}
