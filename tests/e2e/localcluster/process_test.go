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
