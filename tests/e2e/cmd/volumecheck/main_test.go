package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteThenRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run returns after printing instead of waiting for SIGTERM
	var out bytes.Buffer
	if err := run(ctx, []string{"write", file, "abc123"}, &out); err != nil {
		t.Fatalf("write: %v", err)
	}
	if want := "volumecheck: wrote abc123 to " + file + "\n"; out.String() != want {
		t.Fatalf("write printed %q, want %q", out.String(), want)
	}
	out.Reset()
	if err := run(ctx, []string{"read", file}, &out); err != nil {
		t.Fatalf("read: %v", err)
	}
	if want := "volumecheck: read abc123 from " + file + "\n"; out.String() != want {
		t.Fatalf("read printed %q, want %q", out.String(), want)
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), maxToken+1), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no args", nil, "usage"},
		{"relative file", []string{"read", "token"}, "absolute"},
		{"unknown verb", []string{"erase", "/x"}, "usage"},
		{"empty token", []string{"write", filepath.Join(dir, "t"), ""}, "1..256"},
		{"long token", []string{"write", filepath.Join(dir, "t"), strings.Repeat("y", maxToken+1)}, "1..256"},
		{"missing file", []string{"read", filepath.Join(dir, "none")}, "no such file"},
		{"file too big", []string{"read", big}, "more than 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(ctx, tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}
