package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// waitScenario polls GET /v1/scenarios/{id} until the run has ended (its steps are at 0s, or
// it was canceled, so this takes milliseconds).
func waitScenario(t *testing.T, tc *testCloud, id string) scenario.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := tc.do(t, http.MethodGet, "/v1/scenarios/"+id, readerToken, "")
		var st scenario.Status
		if r.status != http.StatusOK || json.Unmarshal(r.body, &st) != nil {
			t.Fatalf("GET /v1/scenarios/%s: %d %s", id, r.status, r.body)
		}
		if st.State != scenario.StateRunning {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("scenario %s still running: %+v", id, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestScenarios(t *testing.T) {
	tc := startCloud(t, server.Config{})
	body := `name: squeeze
expect: quota 3
steps:
  - at: 0s
    quotas: {attachments: 3}
  - at: 0s
    instance: {id: node-a, outOfBandSlots: 2}
  - at: 0s
    instance: {id: no-such-node, outOfBandSlots: 2}
`
	if r := tc.do(t, http.MethodPost, "/v1/scenarios", driverToken, body); r.status != http.StatusForbidden {
		t.Fatalf("POST as driver: %d, want 403", r.status)
	}
	if r := tc.do(t, http.MethodPost, "/v1/scenarios", adminToken, "name: x\nsteps: []\n"); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "no steps") {
		t.Fatalf("POST of an empty scenario: %d %s, want 400 naming the problem", r.status, r.body)
	}
	r := tc.do(t, http.MethodPost, "/v1/scenarios", adminToken, body)
	var st scenario.Status
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &st) != nil || st.ID == "" || st.Steps != 3 {
		t.Fatalf("POST /v1/scenarios: %d %s", r.status, r.body)
	}
	st = waitScenario(t, tc, st.ID)
	if st.State != scenario.StateFailed || st.Done != 3 || st.Failed != 1 || len(st.Results) != 3 || !strings.Contains(st.Results[2].Error, "InstanceNotFound") {
		t.Fatalf("status %+v, want failed with 1 of 3 steps (the unknown instance)", st)
	}
	q, err := tc.admin.GetQuotas(t.Context())
	if err != nil || q.Attachments.Limit != 3 {
		t.Fatalf("quotas %+v, %v: the scenario's step did not land", q, err)
	}
	evs, err := tc.admin.ListEvents(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	// ScenarioStarted is recorded before the first step can run (Manager.Start's onStart).
	if got := strings.Join(types, " "); !strings.Contains(got, "ScenarioStarted QuotasChanged ScenarioStep InstancePatched ScenarioStep ScenarioStep") {
		t.Errorf("events %s: want ScenarioStarted, then each step's mutation with its ScenarioStep", got)
	}

	// Cancel a run waiting for its step an hour away.
	r = tc.do(t, http.MethodPost, "/v1/scenarios", adminToken, "name: later\nsteps:\n  - at: 1h\n    reset: true\n")
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &st) != nil {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	// The DELETE answer itself says canceled: the cancel waits for the run to end.
	if r := tc.do(t, http.MethodDelete, "/v1/scenarios/"+st.ID, adminToken, ""); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"state":"canceled"`) {
		t.Fatalf("DELETE: %d %s, want 200 with state canceled", r.status, r.body)
	}
	if st = waitScenario(t, tc, st.ID); st.State != scenario.StateCanceled || st.Done != 0 {
		t.Fatalf("after DELETE: %+v, want canceled before its step", st)
	}
	var list scenario.StatusList
	if r := tc.do(t, http.MethodGet, "/v1/scenarios", readerToken, ""); r.status != http.StatusOK || json.Unmarshal(r.body, &list) != nil || len(list.Scenarios) != 2 {
		t.Fatalf("GET /v1/scenarios: %d %s", r.status, r.body)
	}
	if r := tc.do(t, http.MethodGet, "/v1/scenarios/scenario-99", readerToken, ""); r.status != http.StatusNotFound || r.errorBody(t).Code != cloud.CodeNotFound {
		t.Fatalf("GET of an unknown run: %d", r.status)
	}
}

// TestScenarioRunsAtMostFour: a fifth run at once is ServerLimitExceeded; Close stops the
// waiting ones.
func TestScenarioRunsAtMostFour(t *testing.T) {
	tc := startCloud(t, server.Config{})
	for i := range scenario.MaxRunning + 1 {
		r := tc.do(t, http.MethodPost, "/v1/scenarios", adminToken, "name: later\nsteps:\n  - at: 1h\n    reset: true\n")
		want := http.StatusCreated
		if i == scenario.MaxRunning {
			want = http.StatusConflict
		}
		if r.status != want {
			t.Fatalf("run %d: %d %s, want %d", i+1, r.status, r.body, want)
		}
	}
	tc.stop() // must not hang on the runs waiting an hour
}

// TestScenarioAliasBombIs413: POST /v1/scenarios with one 100 KB string aliased 2,000 times
// (200 MB once expanded) is 413 PayloadTooLarge, saying why, and starts nothing (issue 24,
// item 8: the aliases were expanded to JSON before the strict decode refused the body).
func TestScenarioAliasBombIs413(t *testing.T) {
	tc := startCloud(t, server.Config{})
	var b strings.Builder
	b.WriteString("name: bomb\nx: &s \"" + strings.Repeat("a", 100_000) + "\"\nsteps:\n")
	for range 2_000 {
		b.WriteString("  - *s\n")
	}
	r := tc.do(t, http.MethodPost, "/v1/scenarios", adminToken, b.String())
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of an alias bomb: %d %.300s, want 413", r.status, r.body)
	}
	if e := r.errorBody(t); e.Code != cloud.CodePayloadTooLarge || !strings.Contains(e.Message, "aliases") {
		t.Fatalf("POST of an alias bomb: %+v, want PayloadTooLarge naming the aliases", e)
	}
	if r := tc.do(t, http.MethodGet, "/v1/scenarios", readerToken, ""); r.status != http.StatusOK || strings.Contains(string(r.body), "bomb") {
		t.Fatalf("GET /v1/scenarios after the refusal: %d %s", r.status, r.body)
	}
}

// TestScenarioStepEventSaysItsOffsetAsADuration: the ScenarioStep event (GET /v1/events and
// the console) gives a step's offset as the scenario file does, +1ms, not in nanoseconds
// (+1000000 before).
func TestScenarioStepEventSaysItsOffsetAsADuration(t *testing.T) {
	tc := startCloud(t, server.Config{})
	r := tc.do(t, http.MethodPost, "/v1/scenarios", adminToken, "name: offset\nsteps:\n  - at: 1ms\n    quotas: {attachments: 3}\n")
	var st scenario.Status
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &st) != nil {
		t.Fatalf("POST /v1/scenarios: %d %s", r.status, r.body)
	}
	waitScenario(t, tc, st.ID)
	evs, err := tc.admin.ListEvents(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, e := range evs {
		if e.Type == "ScenarioStep" {
			details = append(details, e.Detail)
		}
	}
	if want := st.ID + " +1ms PATCH /v1/quotas"; len(details) != 1 || !strings.HasPrefix(details[0], want) {
		t.Fatalf("ScenarioStep details %q, want one starting %q", details, want)
	}
}

// TestScenarioListSaysWhyARunFailed: GET /v1/scenarios gives a failed run's reason (error:
// the run's and its first failed step's) and leaves its results out; before, the list showed
// "results":null and the reason was only in GET /v1/scenarios/{id}.
func TestScenarioListSaysWhyARunFailed(t *testing.T) {
	tc := startCloud(t, server.Config{})
	r := tc.do(t, http.MethodPost, "/v1/scenarios", adminToken,
		"name: toomany\nsteps:\n  - at: 0s\n    quotas: {attachments: 3}\n  - at: 0s\n    instance: {id: node-zz, outOfBandSlots: 1}\n")
	var st scenario.Status
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &st) != nil {
		t.Fatalf("POST /v1/scenarios: %d %s", r.status, r.body)
	}
	if st = waitScenario(t, tc, st.ID); st.State != scenario.StateFailed {
		t.Fatalf("run %+v, want failed", st)
	}
	list := tc.do(t, http.MethodGet, "/v1/scenarios", readerToken, "")
	var raw struct {
		Scenarios []map[string]json.RawMessage `json:"scenarios"`
	}
	if list.status != http.StatusOK || json.Unmarshal(list.body, &raw) != nil || len(raw.Scenarios) != 1 {
		t.Fatalf("GET /v1/scenarios: %d %s", list.status, list.body)
	}
	item := raw.Scenarios[0]
	if _, ok := item["results"]; ok {
		t.Errorf("list item %s: has results, want them left out", list.body)
	}
	var why string
	_ = json.Unmarshal(item["error"], &why)
	for _, want := range []string{`1 of 2 steps failed`, `first: +0s PATCH /v1/instances/node-zz`, `InstanceNotFound`} {
		if !strings.Contains(why, want) {
			t.Errorf("list item's error %q, want it to say %q", why, want)
		}
	}
	if one := tc.do(t, http.MethodGet, "/v1/scenarios/"+st.ID, readerToken, ""); !strings.Contains(string(one.body), `"error":`) ||
		!strings.Contains(string(one.body), `"results":[`) {
		t.Errorf("GET /v1/scenarios/%s: %s, want its error and results", st.ID, one.body)
	}
}

// TestScenarioStepsReadAsBefore: what a run shows of its steps, its results in GET
// /v1/scenarios/{id}, its ScenarioStep events and the request metrics its steps count, for
// every kind of step, failed ones included: the text the steps produced when they went
// through the HTTP handler (b6e4be1), byte for byte.
func TestScenarioStepsReadAsBefore(t *testing.T) {
	tc := startCloud(t, server.Config{MaxFaultRules: 1})
	body := `name: every-step
steps:
  - at: 0s
    quotas: {attachments: 3}
  - at: 0s
    instance: {id: node-a, outOfBandSlots: 2}
  - at: 0s
    instance: {id: no-such-node, outOfBandSlots: 2}
  - at: 0s
    instance: {id: node-a, outOfBandSlots: 99}
  - at: 0s
    fault: {ref: one, operation: AttachVolume, error: Unavailable, probability: 0.5}
  - at: 0s
    fault: {ref: two, operation: DetachVolume, error: Unavailable}
  - at: 0s
    deleteFault: one
  - at: 0s
    deleteFault: one
  - at: 0s
    deleteFault: two
  - at: 0s
    clearFaults: true
  - at: 0s
    reset: true
`
	r := tc.do(t, http.MethodPost, "/v1/scenarios", adminToken, body)
	var st scenario.Status
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &st) != nil {
		t.Fatalf("POST /v1/scenarios: %d %s", r.status, r.body)
	}
	st = waitScenario(t, tc, st.ID)
	wantResults := []string{
		`PATCH /v1/quotas {"attachments":3}`,
		`PATCH /v1/instances/node-a {"outOfBandSlots":2}`,
		`PATCH /v1/instances/no-such-node {"outOfBandSlots":2} failed: PATCH /v1/instances/no-such-node: InstanceNotFound: instance "no-such-node" not found`,
		`PATCH /v1/instances/node-a {"outOfBandSlots":99} failed: PATCH /v1/instances/node-a: InvalidArgument: patch instance "node-a": outOfBandSlots 99 is above the attach limit 4: out-of-band slots are part of the limit (equal to it leaves none for volumes)`,
		`POST /v1/faults {"operation":"AttachVolume","error":"Unavailable","probability":0.5} as one`,
		`POST /v1/faults {"operation":"DetachVolume","error":"Unavailable"} as two failed: POST /v1/faults: ServerLimitExceeded: fault rule: the server holds at most 1 rule; delete some (DELETE /v1/faults/{id} or /v1/faults) first`,
		`DELETE /v1/faults/{one}`,
		`DELETE /v1/faults/{one} failed: DELETE /v1/faults/fault-1: FaultNotFound: fault rule "fault-1" not found`,
		`DELETE /v1/faults/{two} failed: fault "two" was not created (its step failed)`,
		`DELETE /v1/faults`,
		`POST /v1/reset`,
	}
	var results []string
	for _, res := range st.Results {
		line := res.Step
		if res.Error != "" {
			line += " failed: " + res.Error
		}
		results = append(results, line)
	}
	if got, want := strings.Join(results, "\n"), strings.Join(wantResults, "\n"); got != want {
		t.Errorf("results:\n%s\nwant:\n%s", got, want)
	}
	if want := `scenario "every-step": 5 of 11 steps failed; first: +0s PATCH /v1/instances/no-such-node {"outOfBandSlots":2}: PATCH /v1/instances/no-such-node: InstanceNotFound: instance "no-such-node" not found`; st.State != scenario.StateFailed || st.Error != want {
		t.Errorf("run %s, error %q, want failed, %q", st.State, st.Error, want)
	}
	evs, err := tc.admin.ListEvents(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, e := range evs {
		if e.Type == "ScenarioStep" {
			steps = append(steps, e.Detail)
		}
	}
	for i, want := range wantResults {
		if want = st.ID + " +0s " + want; i >= len(steps) || steps[i] != want {
			t.Errorf("ScenarioStep event %d: %q, want %q", i, steps[min(i, len(steps)-1)], want)
		}
	}
	metrics := tc.do(t, http.MethodGet, "/metrics", readerToken, "")
	for _, want := range []string{
		`fakecloud_requests_total{code="",route="patchQuotas",status="200"} 1`,
		`fakecloud_requests_total{code="",route="patchInstance",status="200"} 1`,
		`fakecloud_requests_total{code="InstanceNotFound",route="patchInstance",status="404"} 1`,
		`fakecloud_requests_total{code="InvalidArgument",route="patchInstance",status="400"} 1`,
		`fakecloud_requests_total{code="",route="createFault",status="201"} 1`,
		`fakecloud_requests_total{code="ServerLimitExceeded",route="createFault",status="409"} 1`,
		`fakecloud_requests_total{code="",route="deleteFault",status="200"} 1`,
		`fakecloud_requests_total{code="FaultNotFound",route="deleteFault",status="404"} 1`,
		`fakecloud_requests_total{code="",route="clearFaults",status="200"} 1`,
		`fakecloud_requests_total{code="",route="reset",status="200"} 1`,
	} {
		if !strings.Contains(string(metrics.body), want+"\n") {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}
}
