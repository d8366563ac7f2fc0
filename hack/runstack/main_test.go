package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	csidriver "github.com/fakecloud/fakecloud-csi/pkg/csi"
)

func TestModesAreTheDriversOwn(t *testing.T) {
	if modeController != csidriver.ModeController || modeNode != csidriver.ModeNode {
		t.Errorf("modes %q, %q; the driver's %q, %q", modeController, modeNode, csidriver.ModeController, csidriver.ModeNode)
	}
}

// Each component gets the flags, in the order, that hack/run.sh gave it before
// internal/stack defined them (a user's FAKECLOUD_ARGS and DRIVER_ARGS last, so they win).
func TestFlagsAsRunShGaveThem(t *testing.T) {
	cfg := config{bin: "bin", runDir: "/r", seed: "examples/seed.yaml", tokens: "examples/tokens.yaml", port: 8080, httpBase: 9808,
		nodes: []string{"node-a1", "node-b1"}, cloudArgs: []string{"--max-events=100", "-v=4"}, driverArgs: []string{"--v=4"}}
	st := stackOf(cfg)
	cloud := "--listen=127.0.0.1:8080 --data-dir=/r/cloud --seed=examples/seed.yaml --auth=tokens --tokens-file=examples/tokens.yaml " +
		"--console-node=node-a1=http://127.0.0.1:9809 --console-node=node-b1=http://127.0.0.1:9810 --max-events=100 -v=4"
	ctrl := "--mode=controller --endpoint=unix:///r/controller/csi.sock --cloud-url=http://127.0.0.1:8080 --cloud-token-file=/r/driver-token " +
		"--state-dir=/r/controller --http-addr=127.0.0.1:9808 --v=4"
	node := "--mode=node --node-id=node-b1 --endpoint=unix:///r/node-b1/csi.sock --cloud-url=http://127.0.0.1:8080 --cloud-token-file=/r/driver-token " +
		"--state-dir=/r/node-b1 --http-addr=127.0.0.1:9810 --capacity-min-interval=1s --v=4"
	for _, tt := range []struct {
		name string
		got  []string
		want string
	}{
		{"fake cloud", st.Cloud.Args(), cloud},
		{"controller plugin", st.Plugins[0].Args(), ctrl},
		{"node plugin node-b1", st.Plugins[2].Args(), node},
	} {
		if want := strings.Fields(tt.want); !reflect.DeepEqual(tt.got, want) {
			t.Errorf("%s\n got %q\nwant %q", tt.name, tt.got, want)
		}
	}
	var ids []string
	for _, p := range st.Plugins {
		ids = append(ids, p.ID+":"+p.Name)
	}
	if want := []string{"controller:controller plugin", "node-a1:node plugin node-a1", "node-b1:node plugin node-b1"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("plugins %q, want %q (logs/<id>.log, named so in messages)", ids, want)
	}
}

// A component that exits during the start ends the wait at once, and the report is the end
// of its log only.
func TestStartFailureReportsTheExitedComponentsLog(t *testing.T) {
	dir := t.TempDir()
	bin, runDir := filepath.Join(dir, "bin"), filepath.Join(dir, "run")
	for _, d := range []string{bin, filepath.Join(runDir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var lines []string
	for i := range 25 {
		lines = append(lines, "line "+strconv.Itoa(i))
	}
	script := "#!/bin/sh\nprintf '" + strings.Join(lines, `\n`) + `\n` + "' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, "fakecloud"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config{bin: bin, runDir: runDir, seed: "s", tokens: "t", upFile: filepath.Join(runDir, "up"), port: 1, httpBase: 2, nodes: []string{"n"}}
	var stdout, stderr bytes.Buffer
	if code := run(cfg, &stdout, &stderr); code != 1 {
		t.Fatalf("run = %d, want 1; stderr:\n%s", code, &stderr)
	}
	out := stderr.String()
	for _, w := range []string{"a process exited while waiting for fake cloud on http://127.0.0.1:1",
		"run.sh failed: fake cloud exited; the end of its log " + filepath.Join(runDir, "logs", "fakecloud.log"), "line 5\n", "line 24\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("stderr lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "line 4\n") {
		t.Errorf("stderr has more than the last 20 lines:\n%s", out)
	}
	if _, err := os.Stat(cfg.upFile); err == nil {
		t.Error("a failed start created the up file")
	}
}
