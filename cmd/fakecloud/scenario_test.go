package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

func TestScenarioCommand(t *testing.T) {
	srv, err := server.New(server.Config{Seed: server.DefaultSeed(), Tokens: []server.Token{{Token: "adm", Role: server.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(file, []byte(`name: now
description: two steps at once
expect: the quota is 3
steps:
  - at: 0s
    quotas: {attachments: 3}
  - at: 0s
    instance: {id: no-such-node, outOfBandSlots: 1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: bad\nsteps:\n  - at: 1s\n    quotaz: {attachments: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("adm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		wantOut []string
	}{
		{"no file", []string{"scenario"}, "exactly one FILE", nil},
		{"both tokens", []string{"scenario", "--token=a", "--token-file=b", file}, "exclusive", nil},
		{"missing file", []string{"scenario", filepath.Join(dir, "gone.yaml")}, "no such file", nil},
		{"bad scenario", []string{"scenario", "../../examples/seed.yaml"}, "unknown field", nil},
		{"bad instance map", []string{"scenario", "--map-instance=x", file}, "want FROM=TO", nil},
		{"dry run with a map", []string{"scenario", "--dry-run", "--map-instance=node-a2=node-1", "../../examples/scenarios/stale-count.yaml"}, "",
			[]string{"+10s  PATCH /v1/instances/node-1 {\"outOfBandSlots\":5}"}},
		{"dry run calls nothing", []string{"scenario", "--dry-run", "../../examples/scenarios/noisy-quota.yaml"}, "",
			[]string{"scenario noisy-quota", "expect: ", "+2m10s  PATCH /v1/quotas {\"attachments\":40}"}},
		{"without a token every step fails", []string{"scenario", "--cloud-url=" + ts.URL, file}, "2 of 2 steps failed",
			[]string{"FAILED: PATCH /v1/quotas: Unauthenticated", "the console: " + ts.URL + "/ui\n"}},
		{"a bad scenario names the YAML line and step, not JSON", []string{"scenario", "--dry-run", bad}, `line 4, steps[0] (at 1s): unknown field "quotaz"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, &out, &out)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("run: %v, want error %q\n%s", err, tt.wantErr, out.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}

	// With the token: the quota step lands, the patch of an unknown instance fails alone.
	var out bytes.Buffer
	err = run(context.Background(), []string{"scenario", "--cloud-url=" + ts.URL, "--token-file=" + tokenFile, file}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 steps failed") || !strings.Contains(out.String(), "+0s  PATCH /v1/quotas {\"attachments\":3}  ok") {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	// The console URL carries the token where the page reads it, so it opens showing everything.
	if !strings.Contains(out.String(), "the console: "+ts.URL+"/ui#token=adm\n") {
		t.Fatalf("output lacks the console URL with #token=adm:\n%s", out.String())
	}
	c, err := cloud.NewClient(ts.URL, cloud.WithToken("adm"))
	if err != nil {
		t.Fatal(err)
	}
	if q, err := c.GetQuotas(context.Background()); err != nil || q.Attachments.Limit != 3 {
		t.Fatalf("quotas after the scenario: %+v, %v", q, err)
	}
}
