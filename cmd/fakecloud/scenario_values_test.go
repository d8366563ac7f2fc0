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
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestScenarioBadValuesChangeNothing: `fakecloud scenario` checks every step's values before
// anything runs, as the API would (issue 26): --dry-run fails on a file whose steps the cloud
// would refuse, naming each problem in file order, and a real run of it changes nothing,
// its good first step included. Before, both passed the dry run and the run applied the
// quota step, then failed at the bad ones.
func TestScenarioBadValuesChangeNothing(t *testing.T) {
	srv, err := server.New(server.Config{Seed: server.DefaultSeed(), Tokens: []server.Token{{Token: "adm", Role: server.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	file := filepath.Join(t.TempDir(), "bad-values.yaml")
	if err := os.WriteFile(file, []byte(`name: bad-values
steps:
  - at: 0s
    quotas: {attachments: 3}
  - at: 0s
    fault: {operation: AttachVolme, error: Unavailable}
  - at: 0s
    instance: {id: node-a1, attachLimit: -2}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `bad-values.yaml: scenario "bad-values": line 6, steps[1].fault (at 0s): unknown operation "AttachVolme"`
	wantLast := "line 8, steps[2].instance (at 0s): attachLimit must be >= 1, got -2"
	for _, args := range [][]string{
		{"scenario", "--dry-run", file},
		{"scenario", "--cloud-url=" + ts.URL, "--cloud-token=adm", "--settle-timeout=0", file},
	} {
		var out bytes.Buffer
		err := run(context.Background(), args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), wantLast) {
			t.Fatalf("%v: %v, want an error with\n%s\n...\n%s\noutput:\n%s", args, err, want, wantLast, out.String())
		}
		if out.Len() != 0 {
			t.Errorf("%v printed a timeline for a file it refuses:\n%s", args, out.String())
		}
	}
	c, err := admin.NewClient(ts.URL, cloud.WithToken("adm"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.GetQuotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if q.Attachments.Limit == 3 {
		t.Fatalf("the attachment quota is 3: the refused file's first step ran")
	}
	if rules, err := c.ListFaults(context.Background()); err != nil || len(rules) != 0 {
		t.Fatalf("fault rules after a refused file: %v, %v", rules, err)
	}
}

// TestScenarioCountsInTheSingular: a one-step scenario is "1 step", in the header, the closing
// line and the error (issue 26: "1 steps").
func TestScenarioCountsInTheSingular(t *testing.T) {
	srv, err := server.New(server.Config{Seed: server.DefaultSeed(), Tokens: []server.Token{{Token: "adm", Role: server.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	file := filepath.Join(t.TempDir(), "one.yaml")
	if err := os.WriteFile(file, []byte("name: one\nsteps:\n  - at: 0s\n    instance: {id: no-such-node, outOfBandSlots: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"scenario", "--dry-run", file}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "scenario one (1 step over 0s)\n") {
		t.Errorf("dry run's header is not \"scenario one (1 step over 0s)\" (a file without a description):\n%s", out.String())
	}
	out.Reset()
	err = run(context.Background(), []string{"scenario", "--cloud-url=" + ts.URL, "--cloud-token=adm", "--settle-timeout=0", file}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `scenario "one": 1 of 1 step failed`) {
		t.Errorf("run: %v, want \"1 of 1 step failed\"", err)
	}
	if !strings.Contains(out.String(), "scenario one: 1 of 1 step ran, 1 failed\n") {
		t.Errorf("output lacks \"1 of 1 step ran, 1 failed\":\n%s", out.String())
	}
}
