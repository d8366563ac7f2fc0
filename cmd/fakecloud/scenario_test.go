package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
)

func TestScenarioCommand(t *testing.T) {
	srv, err := server.New(server.Config{Seed: server.DefaultSeed(), Tokens: []server.Token{{Token: "adm", Role: server.RoleAdmin},
		{Token: "rdr", Role: server.RoleReader}}})
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
	// Listed out of time order: it runs sorted, and says so.
	unordered := filepath.Join(dir, "unordered.yaml")
	if err := os.WriteFile(unordered, []byte("name: unordered\nsteps:\n  - at: 300ms\n    quotas: {attachments: 4}\n"+
		"  - at: 0s\n    quotas: {attachments: 3}\n  - at: 300ms\n    reset: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outOfOrder := "warning: line 5, steps[1] (at 0s): listed after steps[0] (at 300ms) but runs before it (steps run in order of at:, not of the file)\n"
	// A closed listener's address: nothing answers there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + ln.Addr().String()
	_ = ln.Close()
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
		{"both tokens (the second by its deprecated name)", []string{"scenario", "--cloud-token=a", "--token-file=b", file}, "exclusive", nil},
		{"missing file", []string{"scenario", filepath.Join(dir, "gone.yaml")}, "no such file", nil},
		{"bad scenario", []string{"scenario", "../../examples/seed.yaml"}, "unknown field", nil},
		{"bad instance map", []string{"scenario", "--map-instance=x", file}, "want FROM=TO", nil},
		{"a negative settle timeout", []string{"scenario", "--settle-timeout=-1s", file}, "--settle-timeout must be in [0, 24h0m0s], got -1s", nil},
		{"a settle timeout past a day", []string{"scenario", "--settle-timeout=25h", file}, "--settle-timeout must be in [0, 24h0m0s]", nil},
		{"progress lines too often", []string{"scenario", "--progress-every=10ms", file}, "--progress-every must be at least 100ms", nil},
		// The cloud's URL is checked before anything is read or called, in the flag's terms.
		{"a cloud url without a scheme", []string{"scenario", "--cloud-url=localhost:18080", "--cloud-token=adm", file},
			`scenario: --cloud-url: "localhost:18080" has no scheme: want an http:// or https:// URL, e.g. http://127.0.0.1:8080 (did you mean "http://localhost:18080"?)`, nil},
		{"a cloud url with a slash, no scheme", []string{"scenario", "--cloud-url=127.0.0.1:18080/", "--cloud-token=adm", file},
			`scenario: --cloud-url: "127.0.0.1:18080/" has no scheme: want an http:// or https:// URL`, nil},
		{"a cloud url of another scheme", []string{"scenario", "--cloud-url=ftp://127.0.0.1:18080", "--cloud-token=adm", file},
			`scenario: --cloud-url: "ftp://127.0.0.1:18080" has the scheme "ftp": want an http:// or https:// URL`, nil},
		{"every flag problem at once", []string{"scenario", "--cloud-url=http://", "--cloud-token=a", "--cloud-token-file=b", "--progress-every=1ms", file},
			"scenario: --cloud-url: \"http://\" has no host: want an http:// or https:// URL, e.g. http://127.0.0.1:8080\n--cloud-token and --cloud-token-file are exclusive\n--progress-every must be at least 100ms", nil},
		{"dry run with a map", []string{"scenario", "--dry-run", "--map-instance=node-a2=node-1", "../../examples/scenarios/stale-count.yaml"}, "",
			[]string{"+10s  PATCH /v1/instances/node-1 {\"outOfBandSlots\":5}"}},
		{"dry run calls nothing", []string{"scenario", "--dry-run", "../../examples/scenarios/noisy-quota.yaml"}, "",
			[]string{"scenario noisy-quota", "expect: ", "+2m10s  PATCH /v1/quotas {\"attachments\":40}"}},
		// The cloud and the token are checked before the first step, each failure named.
		{"without a token nothing runs", []string{"scenario", "--cloud-url=" + ts.URL, file}, "no token given, and the fake cloud at " + ts.URL + " wants one (401 Unauthenticated)",
			nil},
		{"a wrong token is rejected, not missing", []string{"scenario", "--cloud-url=" + ts.URL, "--cloud-token=nope", file},
			"token rejected (401 Unauthenticated: unknown token) by the fake cloud at " + ts.URL, nil},
		{"nothing listening", []string{"scenario", "--cloud-url=" + deadURL, "--cloud-token=adm", file}, "cannot reach a fake cloud at " + deadURL, nil},
		{"not a fake cloud", []string{"scenario", "--cloud-url=" + ts.URL + "/elsewhere", "--cloud-token=adm", file}, "does not answer GET /v1/quotas as a fake cloud (404", nil},
		// A reader's token passes the GET; the first step's 403 stops the run there.
		{"a reader's token stops at the first step", []string{"scenario", "--cloud-url=" + ts.URL, "--cloud-token=rdr", file},
			"token rejected (403 AccessDenied) by the step at +0s", []string{"FAILED: PATCH /v1/quotas: AccessDenied"}},
		// A file out of time order was sorted silently (issue 26's newcomer trial): the dry
		// run and the run both say which step runs before a step listed above it.
		{"a dry run says which steps are out of time order", []string{"scenario", "--dry-run", unordered}, "",
			[]string{"scenario unordered (3 steps over 300ms)\n" + outOfOrder, "     +0s  PATCH /v1/quotas {\"attachments\":3}\n  +300ms  PATCH /v1/quotas {\"attachments\":4}\n"}},
		{"a run says which steps are out of time order before it starts", []string{"scenario", "--cloud-url=" + ts.URL, "--cloud-token=adm", "--settle-timeout=0", unordered}, "",
			[]string{"scenario unordered (3 steps over 300ms)\n" + outOfOrder + "driving ", "+0s  PATCH /v1/quotas {\"attachments\":3}  ok"}},
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
			if tt.wantErr != "" && strings.Contains(out.String(), "no-such-node") {
				t.Errorf("the run went on past a refused token:\n%s", out.String())
			}
		})
	}

	// With the token: the quota step lands, the patch of an unknown instance fails alone.
	var out bytes.Buffer
	err = run(context.Background(), []string{"scenario", "--cloud-url=" + ts.URL, "--cloud-token-file=" + tokenFile, file}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 steps failed") || !strings.Contains(out.String(), "+0s  PATCH /v1/quotas {\"attachments\":3}  ok") {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	// It ends with what ran and failed, not silently at the last step.
	if !strings.Contains(out.String(), ": 2 of 2 steps ran, 1 failed\n") {
		t.Fatalf("output lacks the closing line (2 of 2 steps ran, 1 failed):\n%s", out.String())
	}
	// The console URL carries the token where the page reads it, so it opens showing everything.
	if !strings.Contains(out.String(), "the console: "+ts.URL+"/ui#token=adm\n") {
		t.Fatalf("output lacks the console URL with #token=adm:\n%s", out.String())
	}
	c, err := admin.NewClient(ts.URL, cloud.WithToken("adm"))
	if err != nil {
		t.Fatal(err)
	}
	if q, err := c.GetQuotas(context.Background()); err != nil || q.Attachments.Limit != 3 {
		t.Fatalf("quotas after the scenario: %+v, %v", q, err)
	}
}

// TestScenarioCommandProgress: between steps the command says what it waits for, at least
// every --progress-every (10 s by default), against a real fake cloud on loopback.
func TestScenarioCommandProgress(t *testing.T) {
	srv, err := server.New(server.Config{Seed: server.DefaultSeed(), Tokens: []server.Token{{Token: "adm", Role: server.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	file := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(file, []byte(`name: wait
steps:
  - at: 0s
    quotas: {attachments: 3}
  - at: 2s
    quotas: {attachments: 40}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"scenario", "--cloud-url=" + ts.URL, "--cloud-token=adm", "--progress-every=400ms", file}, &out, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	first, waits, last := -1, 0, -1
	for i, l := range lines {
		switch {
		case strings.Contains(l, `+0s  PATCH /v1/quotas {"attachments":3}  ok`):
			first = i
		case strings.Contains(l, `next step 'PATCH /v1/quotas {"attachments":40}' at t=2s, in `):
			waits++
		case strings.Contains(l, `+2s  PATCH /v1/quotas {"attachments":40}  ok`):
			last = i
		}
	}
	// 2 s of waiting said every 0.4 s up to the step: 5 lines, 4 on a slow machine whose
	// first step took a while.
	if first < 0 || last < first || waits < 4 {
		t.Fatalf("want the first step, at least 4 waiting lines, then the second step; got:\n%s", out.String())
	}
}

// settlingPlugin serves a node plugin's GET /debug/capacity whose flap damping settles at
// until (mode fresh), or that is in mode mode.
type settlingPlugin struct {
	mu      sync.Mutex
	until   time.Time
	mode    string
	damping int
}

func (p *settlingPlugin) setDamping(d int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.damping = d
}

func (p *settlingPlugin) set(until time.Time, mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.until, p.mode = until, mode
}

func (p *settlingPlugin) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"nodeId": "node-a1", "mode": p.mode, "reported": 3, "target": 7,
		"stabilityWindow": "1m0s", "damping": p.damping, "settledInSeconds": max(0, time.Until(p.until).Seconds())})
}

// TestScenarioCommandWaitsForASettledFleet: before the first step the command waits until
// the node plugins the fake cloud relays have no flap damping left from earlier runs and are
// fresh, and until fault rules with an expiry are gone, saying so at least every
// --progress-every; a wait longer than --settle-timeout fails at once with what to do.
func TestScenarioCommandWaitsForASettledFleet(t *testing.T) {
	plugin := &settlingPlugin{mode: "fresh"}
	ps := httptest.NewServer(plugin)
	t.Cleanup(ps.Close)
	srv, err := server.New(server.Config{Seed: server.DefaultSeed(), Tokens: []server.Token{{Token: "adm", Role: server.RoleAdmin}},
		Console: console.Config{Nodes: []console.Node{{Name: "node-a1", URL: ps.URL}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	admin, err := admin.NewClient(ts.URL, cloud.WithToken("adm"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(file, []byte("name: one\nexpect: 3 attachments at once\nsteps:\n  - at: 0s\n    quotas: {attachments: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(extra ...string) []string {
		return append([]string{"scenario", "--cloud-url=" + ts.URL, "--cloud-token=adm", "--progress-every=300ms"}, append(extra, file)...)
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T)
		args    []string
		wantErr string
		want    []string
		notWant []string
	}{
		{"settled: starts at once", func(*testing.T) { plugin.set(time.Time{}, "fresh") }, args(), "",
			[]string{"the fleet is settled: starting", "+0s  PATCH /v1/quotas"}, []string{"waiting for the fleet"}},
		{"raised lately: waits, saying so, then starts", func(*testing.T) { plugin.set(time.Now().Add(time.Second), "fresh"); plugin.setDamping(0) }, args(), "",
			[]string{"the fleet is not settled: waiting about ",
				" before the first step (at most 10m0s); " + skipSettle + ":\n  node-a1: reports 3, mode fresh (the cloud's value: 7), stability window 1m0s; settles in ",
				": it raised its value lately, and a decrease before then would count as a flap and double its window\n",
				"the fleet is settled: starting"}, []string{"node node-a1"}},
		{"damped for a second: waits, saying so, then starts", func(*testing.T) { plugin.set(time.Now().Add(time.Second), "fresh"); plugin.setDamping(1) }, args(), "",
			[]string{"  node-a1: reports 3, mode fresh (the cloud's value: 7), stability window 1m0s (flap damping 1); settles in ",
				", when its flap damping has decayed\n", "the fleet is settled: starting", "+0s  PATCH"}, []string{"node node-a1"}},
		{"ramping for a second: waits for fresh", func(*testing.T) {
			plugin.set(time.Time{}, "ramping")
			plugin.setDamping(0)
			time.AfterFunc(time.Second, func() { plugin.set(time.Time{}, "fresh") })
		}, args(), "", []string{"the fleet is not settled: waiting until the plugins below are in mode fresh",
			"  node-a1: reports 3, mode ramping (the cloud's value: 7), stability window 1m0s; not settled until it is in mode fresh\n",
			"waiting for the fleet to settle: node-a1 (not in mode fresh yet)", "the fleet is settled: starting"}, nil},
		{"a fault rule with an expiry: waits until it is gone", func(t *testing.T) {
			plugin.set(time.Time{}, "fresh")
			if _, err := admin.CreateFault(context.Background(), cloud.FaultRule{Operation: cloud.OperationCreateSnapshot, Error: cloud.CodeThrottled, TTLSeconds: 1}); err != nil {
				t.Fatal(err)
			}
		}, args(), "", []string{"the fleet is not settled: waiting about 1s", "  fault rule fault-", "(CreateSnapshot Throttled) expires in",
			"waiting for the fleet to settle: fault rule fault-", "the fleet is settled: starting"}, nil},
		{"damped for longer than the timeout: fails at once, saying what to do", func(*testing.T) {
			plugin.set(time.Now().Add(30*time.Minute), "fresh")
			plugin.setDamping(1)
		},
			args("--settle-timeout=1m"), "not settled within 1m0s (30m0s at least): restart the node plugins to start them afresh (flap damping lives in their memory only); " +
				skipSettle + ":\n  node-a1: reports 3, mode fresh (the cloud's value: 7), stability window 1m0s (flap damping 1); settles in 30m0s, when its flap damping has decayed",
			nil, []string{"PATCH"}},
		// --settle-timeout=0 used to say only "starting without checking", then repeat the
		// header's timeline as if it held (issue 26): it now shows each plugin's window and
		// says how the outcome differs.
		{"--settle-timeout=0 on a damped fleet: starts at once, saying how the outcome differs", func(*testing.T) {
			plugin.set(time.Now().Add(30*time.Minute), "fresh")
			plugin.setDamping(1)
		}, args("--settle-timeout=0"), "",
			[]string{"  node-a1: reports 3, mode fresh (the cloud's value: 7), stability window 1m0s (flap damping 1); settles in 30m0s, when its flap damping has decayed\n",
				"--settle-timeout=0: starting although the fleet is not settled (above)",
				"the expected outcome assumes settled plugins, so here increases land later than it says", "restart the node plugins", "+0s  PATCH",
				"expected: 3 attachments at once\n", "(the plugins were not settled at the start, see above: increases land later than expected)"},
			[]string{"waiting for the fleet"}},
		// The summary listed node-a1 as "mode fresh ... window 30s" and then said that it
		// "raised its value lately ... settles in 3m46s" (issue 26's newcomer trial): one line
		// per plugin now says both, and never calls settled a plugin it then waits for.
		{"--settle-timeout=0 on a plugin that raised its value lately: one line says it is not settled, and why", func(*testing.T) {
			plugin.set(time.Now().Add(4*time.Minute), "fresh")
			plugin.setDamping(0)
		}, args("--settle-timeout=0"), "",
			[]string{"  node-a1: reports 3, mode fresh (the cloud's value: 7), stability window 1m0s; settles in 4m0s: it raised its value lately, and a decrease before then would count as a flap and double its window\n",
				"--settle-timeout=0: starting although the fleet is not settled (above)", "+0s  PATCH"},
			[]string{"; settled", "the fleet is settled", "node node-a1"}},
		{"--settle-timeout=0 on a settled fleet: says so and starts", func(*testing.T) { plugin.set(time.Time{}, "fresh"); plugin.setDamping(0) }, args("--settle-timeout=0"), "",
			[]string{"  node-a1: reports 3, mode fresh (the cloud's value: 7), stability window 1m0s; settled\n", "--settle-timeout=0: the fleet is settled: starting", "+0s  PATCH"},
			[]string{"waiting for the fleet", "not settled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup(t)
			var out bytes.Buffer
			start := time.Now()
			err := run(context.Background(), tt.args, &out, &out)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("run: %v, want error %q\n%s", err, tt.wantErr, out.String())
			}
			if tt.wantErr != "" && time.Since(start) > 5*time.Second {
				t.Errorf("a wait known to be too long took %v to fail, want at once", time.Since(start))
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), "node node-") || err != nil && strings.Contains(err.Error(), "node node-") {
				t.Errorf("doubled noun \"node node-...\" in:\n%s\n%v", out.String(), err)
			}
			for _, w := range tt.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
}
