package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelp: help, -h and --help print the usage, one line per subcommand, and succeed; no
// arguments print it too and fail; an unknown subcommand points to help.
func TestHelp(t *testing.T) {
	subcommands := []string{"image", "kind-config", "render", "apply", "wait", "snapshotter", "get", "check"}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, nil} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		text := out.String()
		if args == nil {
			if err == nil || !strings.Contains(err.Error(), "no subcommand given") {
				t.Errorf("no arguments: error %v, want one saying no subcommand was given", err)
			}
			text = errOut.String()
		} else if err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if !strings.HasPrefix(text, "usage: kindctl SUBCOMMAND [flags]") {
			t.Errorf("%v: output %q, want the usage", args, text)
		}
		for _, s := range subcommands {
			if !strings.Contains(text, "\n  "+s+" ") {
				t.Errorf("%v: usage lacks a line for %s:\n%s", args, s, text)
			}
		}
	}
	err := run(context.Background(), []string{"hlep"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `unknown subcommand "hlep" (kindctl help lists them)`) {
		t.Errorf("unknown subcommand: %v", err)
	}
}

// TestSnapshotterSaysWhatItFetches: snapshotter prints what it fetches before the long,
// silent go mod download (a first run compiles and downloads for about a minute). A go
// command that fails at once stands in for the download; the line must come before it.
func TestSnapshotterSaysWhatItFetches(t *testing.T) {
	goBin := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(goBin, []byte("#!/bin/sh\necho 'no network here' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	deploy, err := filepath.Abs("../../../../deploy/base")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(context.Background(), []string{"snapshotter", "--deploy=" + deploy, "--out=" + t.TempDir(), "--go=" + goBin}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "no network here") {
		t.Fatalf("snapshotter with a failing go: %v, want its error", err)
	}
	if want := "fetching external-snapshotter v"; !strings.HasPrefix(out.String(), want) ||
		!strings.Contains(out.String(), "from the Go module proxy: its CRDs and snapshot-controller manifests, into ") {
		t.Errorf("output %q, want a progress line starting %q", out.String(), want)
	}
}
