package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// TestScenarioAPIAnswersAsItsRoutes: a scenario's steps, called in process (scenarioAPI), do
// what the same calls of cloud's HTTP client do against the routes: for every step kind,
// valid and invalid, and for every role, the same error text (what a step's result and its
// ScenarioStep event show), the same events in the log, the same request metrics. Two clouds
// of the same seed take the same calls, one in process, the other over HTTP.
func TestScenarioAPIAnswersAsItsRoutes(t *testing.T) {
	seed := Seed{
		InstanceTypes: []cloud.InstanceType{{Name: "small", MaxAttachments: 4}},
		Instances: []store.SeedInstance{
			{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "node-a", Zone: "zone-a", InstanceType: "small"}},
		},
		Quotas: &store.Limits{Attachments: 40, Volumes: 1000, CapacityBytes: 1 << 40},
	}
	tokens := []Token{{Token: "adm", Role: RoleAdmin}, {Token: "drv", Role: RoleDriver}, {Token: "rdr", Role: RoleReader}}
	start := func(t *testing.T) (*Server, *httptest.Server) {
		s, err := New(Config{Seed: seed, Tokens: tokens, MaxFaultRules: 1})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(func() {
			hs.Close()
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return s, hs
	}
	inProc, inProcHTTP := start(t)
	overHTTP, overHTTPServer := start(t)
	_ = overHTTP

	ptr := func(n int) *int { return &n }
	ptr64 := func(n int64) *int64 { return &n }
	// steps calls api as a scenario would, every kind of step, ones that fail included, and
	// says what each answered.
	steps := func(ctx context.Context, api scenario.API) []string {
		var out []string
		say := func(what string, v any, err error) {
			if err != nil {
				out = append(out, what+": "+err.Error())
				return
			}
			out = append(out, fmt.Sprintf("%s: ok %v", what, v))
		}
		inst, err := api.PatchInstance(ctx, "node-a", cloud.InstancePatch{OutOfBandSlots: ptr(2)})
		if err == nil {
			say("patch instance", fmt.Sprintf("%s slots %d health %s", inst.ID, inst.OutOfBandSlots, inst.Health), nil)
		} else {
			say("patch instance", nil, err)
		}
		_, err = api.PatchInstance(ctx, "no-such-node", cloud.InstancePatch{OutOfBandSlots: ptr(1)})
		say("patch unknown instance", nil, err)
		_, err = api.PatchInstance(ctx, "node-a", cloud.InstancePatch{OutOfBandSlots: ptr(99)})
		say("patch instance over its limit", nil, err)
		_, err = api.PatchInstance(ctx, "..", cloud.InstancePatch{OutOfBandSlots: ptr(1)})
		say("patch instance ..", nil, err)
		q, err := api.PatchQuotas(ctx, cloud.QuotasPatch{Attachments: ptr64(3)})
		if err == nil {
			say("patch quotas", q.Attachments.Limit, nil)
		} else {
			say("patch quotas", nil, err)
		}
		_, err = api.PatchQuotas(ctx, cloud.QuotasPatch{})
		say("empty quota patch", nil, err)
		one := 0.5
		rule, err := api.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable, Probability: &one, TTLSeconds: 60})
		if err == nil {
			say("create fault", fmt.Sprintf("%s %s p=%v", rule.ID, rule.Operation, *rule.Probability), nil)
		} else {
			say("create fault", nil, err)
		}
		_, err = api.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationDetachVolume, Error: cloud.CodeUnavailable})
		say("create fault past the limit", nil, err)
		_, err = api.CreateFault(ctx, cloud.FaultRule{Operation: "AtachVolume"})
		say("create invalid fault", nil, err)
		say("delete fault", nil, api.DeleteFault(ctx, "fault-1"))
		say("delete fault again", nil, api.DeleteFault(ctx, "fault-1"))
		say("delete fault with a bad ID", nil, api.DeleteFault(ctx, strings.Repeat("x", 300)))
		say("clear faults", nil, api.ClearFaults(ctx))
		say("reset", nil, api.Reset(ctx))
		return out
	}
	ctx := context.Background()
	for _, role := range []Role{RoleReader, RoleDriver, RoleAdmin} {
		token := map[Role]string{RoleAdmin: "adm", RoleDriver: "drv", RoleReader: "rdr"}[role]
		client, err := admin.NewClient(overHTTPServer.URL, cloud.WithToken(token))
		if err != nil {
			t.Fatal(err)
		}
		got, want := steps(ctx, scenarioAPI{s: inProc, caller: caller{role: role}}), steps(ctx, client)
		if !slices.Equal(got, want) {
			t.Errorf("role %s: in process\n  %s\nover HTTP\n  %s", role, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	for _, look := range []func(*testing.T, string) string{eventLog, requestMetrics} {
		if got, want := look(t, inProcHTTP.URL), look(t, overHTTPServer.URL); got != want {
			t.Errorf("in process:\n%s\nover HTTP:\n%s", got, want)
		}
	}
}

// eventLog is the event log of the cloud at url without the events' times, one a line.
func eventLog(t *testing.T, url string) string {
	t.Helper()
	c, err := admin.NewClient(url, cloud.WithToken("rdr"))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := c.ListEvents(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range evs {
		e.Time = time.Time{}
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	return b.String()
}

// requestMetrics is the fakecloud_requests_total series of the cloud at url, sorted.
func requestMetrics(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer rdr")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	var lines []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "fakecloud_requests_total{") {
			lines = append(lines, line)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
