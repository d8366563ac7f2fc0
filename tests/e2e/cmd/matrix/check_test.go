package main

import (
	"bytes"
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

// The check refuses to start without its cluster, cloud and token, before anything is
// contacted, saying what is missing.
func TestCheckRefused(t *testing.T) {
	cells := "--cells=../../matrix/cells.json"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check"}, "check: --kubeconfig is required"},
		{[]string{"check", cells, "--kubeconfig=k", "--cloud-url=http://127.0.0.1:1"}, "--cloud-url and --cloud-token-file are required"},
		{[]string{"check", cells, "--kubeconfig=k", "--cloud-url=http://127.0.0.1:1", "--cloud-token-file=/nonexistent/token"}, "check: cloud token"},
		{[]string{"check", cells, "--kubeconfig=k", "--cloud-url=http://127.0.0.1:1", "--cloud-token-file=t", "extra"}, `unknown command "extra"`},
		{[]string{"check", "--record=maybe"}, `invalid argument "maybe" for "--record" flag`},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() > 0 {
			t.Errorf("%q: %v, stdout %q; want an error containing %q", tc.args, err, out.String(), tc.want)
		}
	}
}
