package localcluster

import (
	"context"
	"os"
	"path/filepath"
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(crash.logPath)
		if strings.Count(string(data), "=== ") >= 4 { // start, exit, start, exit
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crash was not restarted; log:\n%s", data)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	if err := p.resume(ctx, v2); err != nil {
		t.Fatalf("resume with v2: %v", err)
	}
	if got := p.binary(); got != v2 {
		t.Errorf("binary after resume = %s, want %s", got, v2)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(p.logPath)
		log := string(data)
		if strings.Count(log, "start: "+v1+" ") == 1 && strings.Count(log, "start: "+v2+" ") >= 2 && strings.Count(log, "running v2 --flag") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expected v1 once, then v2 with the same args restarted after its crash; log:\n%s", data)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.stop()
	if err := p.resume(ctx, ""); err != nil {
		t.Fatalf("resume keeping the binary: %v", err)
	}
	if got := p.binary(); got != v2 {
		t.Errorf("binary after resume without one = %s, want %s", got, v2)
	}
}

// stopAll stops the nodes' components together, before the rest: four that each take a
// second to exit on SIGTERM take about that long in all, not four seconds, and the control
// plane's component stops after every one of them.
func TestStopAllStopsNodesTogetherFirst(t *testing.T) {
	dir := t.TempDir()
	s, err := newSupervisor(filepath.Join(dir, "logs"), filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	order := filepath.Join(dir, "order")
	slowExit := func(name string) []string {
		return []string{"-c", "trap 'sleep 1; echo " + name + " >> " + order + "; exit 0' TERM; echo up; while :; do sleep 0.05; done"}
	}
	if _, err := s.start(ctx, procSpec{Name: "apiserver", Path: "/bin/sh", Args: slowExit("apiserver")}); err != nil {
		t.Fatal(err)
	}
	var nodes []*proc
	for _, name := range []string{"kubelet-1", "plugin-1", "kubelet-2", "plugin-2"} {
		p, err := s.start(ctx, procSpec{Name: name, Path: "/bin/sh", Args: slowExit(name), Node: true})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, p)
	}
	// Every shell has set its trap once it printed "up".
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range append(nodes, s.procs[0]) {
		for {
			if data, _ := os.ReadFile(p.logPath); strings.Contains(string(data), "up\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not start", p.spec.Name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	start := time.Now()
	s.stopAll()
	took := time.Since(start)
	data, err := os.ReadFile(order)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(data))
	if len(lines) != 5 || lines[4] != "apiserver" {
		t.Errorf("exit order %v: want the four node components, then apiserver", lines)
	}
	// One after the other: 5 × 1 s. Together: 1 s for the nodes, 1 s for apiserver.
	if took > 3500*time.Millisecond {
		t.Errorf("stopAll took %s: the node components were not stopped together", took)
	}
}
