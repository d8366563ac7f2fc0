package localcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSupervisorRestartsAndStops(t *testing.T) {
	dir := t.TempDir()
	s, err := newSupervisor(filepath.Join(dir, "logs"), filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One that crashes at once and must come back; one that runs until stopped.
	crash, err := s.start(ctx, procSpec{Name: "crash", Path: "/bin/sh", Args: []string{"-c", "echo up; exit 3"}, Restart: true})
	if err != nil {
		t.Fatal(err)
	}
	long, err := s.start(ctx, procSpec{Name: "long", Path: "/bin/sh", Args: []string{"-c", "echo up; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	// start, exit, start, exit: crashed, restarted, crashed again.
	waitFor(t, "crash restarted after its crash", func() bool {
		data, _ := os.ReadFile(crash.logPath)
		return strings.Count(string(data), "=== ") >= 4
	}, func() string { data, _ := os.ReadFile(crash.logPath); return "log:\n" + string(data) })
	if !long.running() {
		t.Fatal("long is not running")
	}
	if _, err := os.Stat(long.pidPath); err != nil {
		t.Fatalf("pid file: %v", err)
	}
	s.stopAll()
	if long.running() {
		t.Error("long still running after stopAll")
	}
	if _, err := os.Stat(long.pidPath); !os.IsNotExist(err) {
		t.Errorf("pid file of long left behind: %v", err)
	}
}

// A rolling update of one component: stop it, start it again from another
// binary; the supervisor keeps restarting the new one when it crashes.
func TestSupervisorResumeSwapsBinary(t *testing.T) {
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
	v1 := script("v1", "echo running v1; exec sleep 60")
	v2 := script("v2", "echo running v2 \"$@\"; exit 3") // crashes: must be restarted as v2
	p, err := s.start(ctx, procSpec{Name: "plugin", Path: v1, Args: []string{"--flag"}, Restart: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.resume(ctx, v2); err == nil {
		t.Fatal("resume of a running process: expected an error")
	}
	p.stop()
	if p.running() {
		t.Fatal("plugin still running after stop")
	}
	resumed := time.Now()
	if err := p.resume(ctx, v2); err != nil {
		t.Fatalf("resume with v2: %v", err)
	}
	if got := p.binary(); got != v2 {
		t.Errorf("binary after resume = %s, want %s", got, v2)
	}
	logOf := func() string { data, _ := os.ReadFile(p.logPath); return "log:\n" + string(data) }
	// v2 crashes at once; the supervisor launches it again restartDelay later. Wait for
	// that launch and for its end, so both runs have written all they write.
	first, _ := current(p)
	var again chan struct{}
	waitFor(t, "v2 launched again after its crash", func() bool {
		var cmd *exec.Cmd
		cmd, again = current(p)
		return cmd != first
	}, logOf)
	if took := time.Since(resumed); took < restartDelay {
		t.Errorf("v2 launched again %s after the resume: the supervisor waits restartDelay (%s) after a crash", took, restartDelay)
	}
	waitFor(t, "the second run of v2 to crash", func() bool { return isClosed(again) }, logOf)
	if log := logOf(); strings.Count(log, "start: "+v1+" ") != 1 || strings.Count(log, "start: "+v2+" ") < 2 || strings.Count(log, "running v2 --flag") < 2 {
		t.Fatalf("expected v1 once, then v2 with the same args restarted after its crash; %s", log)
	}
	p.stop()
	if err := p.resume(ctx, ""); err != nil {
		t.Fatalf("resume keeping the binary: %v", err)
	}
	if got := p.binary(); got != v2 {
		t.Errorf("binary after resume without one = %s, want %s", got, v2)
	}
}

// stopAll stops the nodes' components together, before the rest: each of the four node
// components exits on SIGTERM only once all four have had theirs, so one stopped after
// the other would wait for the next one's signal until stopGrace's SIGKILL and never
// write its line; the control plane's component stops after every one of them. No clock
// in it: how long stopAll takes depends on the machine's load.
func TestStopAllStopsNodesTogetherFirst(t *testing.T) {
	dir := t.TempDir()
	s, err := newSupervisor(filepath.Join(dir, "logs"), filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	order := filepath.Join(dir, "order")
	termed := filepath.Join(dir, "termed")
	if err := os.Mkdir(termed, 0o755); err != nil {
		t.Fatal(err)
	}
	nodeNames := []string{"kubelet-1", "plugin-1", "kubelet-2", "plugin-2"}
	exitAfter := func(name, wait string) []string {
		return []string{"-c", "trap '" + wait + "echo " + name + " >> " + order + "; exit 0' TERM; echo up; while :; do sleep 0.05; done"}
	}
	// Signalled: a file in termed. Exit once the four are there.
	allTermed := "until set -- " + termed + "/*; [ $# -ge " + strconv.Itoa(len(nodeNames)) + " ]; do sleep 0.05; done; "
	if _, err := s.start(ctx, procSpec{Name: "apiserver", Path: "/bin/sh", Args: exitAfter("apiserver", "")}); err != nil {
		t.Fatal(err)
	}
	var nodes []*proc
	for _, name := range nodeNames {
		p, err := s.start(ctx, procSpec{Name: name, Path: "/bin/sh", Args: exitAfter(name, "touch "+filepath.Join(termed, name)+"; "+allTermed), Node: true})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, p)
	}
	// Every shell has set its trap once it printed "up".
	for _, p := range append(nodes, s.procs[0]) {
		logOf := func() string { data, _ := os.ReadFile(p.logPath); return string(data) }
		waitFor(t, p.spec.Name+" started", func() bool { return strings.Contains(logOf(), "up\n") }, func() string { return "log:\n" + logOf() })
	}
	s.stopAll()
	data, err := os.ReadFile(order)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(data))
	if len(lines) != 5 || lines[4] != "apiserver" {
		t.Errorf("exit order %v: want the four node components (each exits once all four had SIGTERM), then apiserver", lines)
	}
}

// waitFor polls cond until it holds and fails the test, with what and show()'s text, if it
// does not hold by the test binary's own deadline (go test -timeout) less a tenth of the
// time left, so that the failure says what was awaited before the timeout's panic would.
// No fixed wall-clock bound: restartDelay is the only delay the supervisor adds to what
// these tests wait for, and a niced test process and its children can go seconds without
// CPU on a loaded machine; TestSupervisorResumeSwapsBinary failed so against a 10 s bound,
// ten times the one backoff it waited for. Without a -timeout it waits as long as it takes.
func waitFor(t *testing.T, what string, cond func() bool, show func() string) {
	t.Helper()
	deadline, bounded := t.Deadline()
	if bounded {
		deadline = deadline.Add(-time.Until(deadline) / 10)
	}
	for !cond() {
		if bounded && time.Now().After(deadline) {
			t.Fatalf("%s: not by the test's deadline less a tenth (%s); %s", what, deadline.Format(time.RFC3339), show())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// current is the command p runs (or ran last) and the channel closed when it has exited.
func current(p *proc) (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}
