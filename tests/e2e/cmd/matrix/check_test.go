package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
		wantErr             bool
	}{
		{name: "token and newline", content: "demo-admin-token\n", want: "demo-admin-token"},
		{name: "empty", content: " \n", wantErr: true},
		{name: "two words", content: "a b\n", wantErr: true},
		{name: "too long", content: strings.Repeat("a", maxTokenBytes+1), wantErr: true},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readToken(p)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: readToken = %q, %v; want %q (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := readToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: want an error")
	}
}

// The check refuses to start without its cluster, cloud and token; nothing is contacted.
func TestRunCheckFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--kubeconfig=k", "--cloud-url=http://127.0.0.1:1"},
		{"--kubeconfig=k", "--cloud-url=http://127.0.0.1:1", "--cloud-token-file=t", "extra"},
	} {
		if err := runCheck(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("runCheck(%q): want an error", args)
		}
	}
}
