package scenario_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field names its line", "name: x\nsteps:\n  - at: 1s\n    reset: true\n    bogus: 1\n", []string{`line 5, steps[0] (at 1s): unknown field "bogus"`}},
		{"unknown field in a flow mapping names its line", "name: x\nsteps:\n  - at: 1s\n    instance: {id: n, outOfBand: 1}\n", []string{`line 4, steps[0] (at 1s): unknown field "outOfBand"`}},
		{"unknown field of a later step names that step", "name: x\nsteps:\n  - at: 1s\n    reset: true\n  - at: 2s\n    quotaz: {attachments: 3}\n",
			[]string{`scenario: line 6, steps[1] (at 2s): unknown field "quotaz"`}},
		{"unknown top-level field: its line, no step", "name: x\nstepz: []\n", []string{`scenario: line 2: unknown field "stepz" (did you mean "steps"?)`}},
		{"a mistyped field of a step's instance: the field meant", "name: x\nsteps:\n  - at: 1s\n    instance: {id: n, outOfBandSlot: 1}\n",
			[]string{`scenario: line 4, steps[0] (at 1s): unknown field "outOfBandSlot" (did you mean "outOfBandSlots"?)`}},
		{"a mistyped field of a fault step", "name: x\nsteps:\n  - at: 1s\n    fault: {operation: AttachVolume, eror: Throttled}\n",
			[]string{`unknown field "eror" (did you mean "error"?)`}},
		{"a tab for indentation", "name: x\nsteps:\n  - at: 1s\n\treset: true\n",
			[]string{"scenario: line 4: YAML does not allow tabs for indentation, indent with spaces (found a tab character"}},
		{"no name, no steps", "steps: []\n", []string{"name is required", "no steps"}},
		{"control characters in the free texts", "name: x\ndescription: \"two\\nlines\"\nexpect: \"\\e[2J\"\nsteps:\n  - at: 1s\n    reset: true\n    note: \"a\\0\"\n",
			[]string{"description has the control character U+000A at byte 3", "expect has the control character U+001B at byte 0",
				"steps[0] (at 1s): note has the control character U+0000 at byte 1"}},
		{"bad duration", "name: x\nsteps:\n  - at: soon\n    reset: true\n",
			[]string{`scenario: line 3, steps[0].at: want a duration with its unit like 30s, 2m or 1m30s, got "soon"`}},
		{"a duration without its unit", "name: x\nsteps:\n  - at: 1s\n    reset: true\n  - at: 30\n    reset: true\n",
			[]string{`scenario: line 5, steps[1].at: want a duration with its unit like 30s, 2m or 1m30s, got "30"`}},
		{"a noise interval without its unit, flow style", "name: x\nsteps:\n  - {at: 1s, quotaNoise: {quota: volumes, base: 5, amplitude: 1, every: 5, for: 1m}}\n",
			[]string{`scenario: line 3, steps[0].quotaNoise.every: want a duration with its unit`}},
		{"a quota with a word", "name: x\nsteps:\n  - at: 1s\n    quotas: {attachments: many}\n",
			[]string{`scenario: line 4, steps[0].quotas.attachments: want a whole number, got "many"`}},
		{"a size with a unit", "name: x\nsteps:\n  - at: 1s\n    quotas:\n      capacityBytes: 10Gi\n",
			[]string{`scenario: line 5, steps[0].quotas.capacityBytes: want a whole number of bytes like 10737418240 (10 GiB; no units such as 10Gi), got "10Gi"`}},
		{"a fault's probability as a percentage (a field of the embedded rule)", "name: x\nsteps:\n  - at: 1s\n    fault: {operation: \"*\", error: Unavailable, probability: 5%}\n",
			[]string{`scenario: line 4, steps[0].fault.probability: want a number, got "5%"`}},
		{"a check names the step's line", "name: x\nsteps:\n  - at: 1s\n    reset: true\n  - at: 2s\n",
			[]string{`line 5, steps[1] (at 2s): no action`}},
		{"every problem at once", `name: x
steps:
  - at: 1s
  - at: 2s
    reset: true
    clearFaults: true
  - at: 3s
    deleteFault: nope
  - at: 25h
    instance: {id: "", outOfBandSlots: 1}
  - at: 4s
    quotaNoise: {quota: bytes, base: 1, amplitude: 2, every: 1ms, for: 0s}
`, []string{"steps[0] (at 1s): no action", "one action per step, got clearFaults, reset", `deleteFault "nope": no earlier fault step`,
			"at must be within", "instance id", `quota "bytes"`, "amplitude 2", "every 1ms", "for 0s"}},
		{"delete before create", `name: x
steps:
  - at: 1s
    deleteFault: f
  - at: 2s
    fault: {ref: f, operation: "*", error: Unavailable}
`, []string{"no earlier fault step"}},
		{"ref twice", `name: x
steps:
  - at: 1s
    fault: {ref: f, operation: "*", error: Unavailable}
  - at: 2s
    fault: {ref: f, operation: "*", error: Unavailable}
`, []string{`fault ref "f" used twice`}},
		{"noise past the step bound", "name: x\nsteps:\n  - at: 0s\n    quotaNoise: {quota: volumes, base: 5, amplitude: 1, every: 100ms, for: 24h}\n",
			[]string{"more than 10000 steps"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenario.Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, bad := range []string{"JSON", "Go struct", "Go value", "int64", "time: "} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("error %q names %q: the file is YAML", err, bad)
				}
			}
		})
	}
}

// TestNoiseExpands: noise is Base ± Amplitude every Every for For, then Base, the same for the
// same seed, merged with the other steps by offset.
func TestDescribe(t *testing.T) {
	tests := []struct {
		name, step, want string
	}{
		// A rule being installed has fired nothing yet: its echo has no count.
		{"fault: no fired count", "fault: {operation: AttachVolume, error: Throttled}",
			`POST /v1/faults {"operation":"AttachVolume","error":"Throttled"}`},
		{"fault with a ref", "fault: {ref: outage, operation: GetCapacity, error: Unavailable, count: 2}",
			`POST /v1/faults {"operation":"GetCapacity","error":"Unavailable","count":2} as outage`},
		{"instance", "instance: {id: node-a, outOfBandSlots: 3}", `PATCH /v1/instances/node-a {"outOfBandSlots":3}`},
		{"quotas", "quotas: {attachments: 5}", `PATCH /v1/quotas {"attachments":5}`},
		{"reset", "reset: true", "POST /v1/reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := scenario.Parse([]byte("name: x\nsteps:\n  - at: 1s\n    " + tt.step + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := sc.Steps[0].Describe(); got != tt.want {
				t.Errorf("Describe() = %s\nwant         %s", got, tt.want)
			}
		})
	}
}

func TestNoiseExpands(t *testing.T) {
	src := []byte(`name: noisy
steps:
  - at: 10s
    reset: true
  - at: 0s
    quotaNoise: {quota: attachments, base: 10, amplitude: 1, every: 5s, for: 20s, seed: 7}
`)
	a, err := scenario.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := scenario.Parse(src)
	if a.String() != b.String() {
		t.Fatalf("same seed, different steps:\n%s\n%s", a, b)
	}
	var offsets []time.Duration
	for _, s := range a.Steps {
		offsets = append(offsets, time.Duration(s.At))
		if s.Quotas != nil && (*s.Quotas.Attachments < 9 || *s.Quotas.Attachments > 11) {
			t.Errorf("noise value %d outside 10±1", *s.Quotas.Attachments)
		}
	}
	want := []time.Duration{0, 5 * time.Second, 10 * time.Second, 10 * time.Second, 15 * time.Second, 20 * time.Second}
	if len(offsets) != len(want) {
		t.Fatalf("offsets %v, want %v", offsets, want)
	}
	for i := range want {
		if offsets[i] != want[i] {
			t.Fatalf("offsets %v, want %v", offsets, want)
		}
	}
	if !a.Steps[2].Reset || a.Steps[3].Reset {
		t.Errorf("at 10s the reset (listed first in the file) must run before the noise step: %s", a)
	}
	if last := a.Steps[len(a.Steps)-1]; *last.Quotas.Attachments != 10 || a.Duration() != 20*time.Second {
		t.Errorf("last step %s at %v, want the base 10 at 20s", last.Describe(), a.Duration())
	}
}

// TestExamplesParse: every shipped scenario parses and names its expected outcome.
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../../../examples/scenarios/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("examples/scenarios: %v, %v (want at least 5)", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := scenario.Parse(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if sc.Expect == "" || !strings.Contains(string(data), "# Expected:") {
			t.Errorf("%s: no expect field or '# Expected:' header", f)
		}
	}
}

// TestRunAgainstTheFakeCloud runs a timeline on a real fake cloud with a fake clock: each
// step lands in the cloud and in its event log, in order, at its offset.
func TestRunAgainstTheFakeCloud(t *testing.T) {
	sc, err := scenario.Parse([]byte(`name: all-kinds
steps:
  - at: 30s
    instance: {id: node-a, outOfBandSlots: 3}
  - at: 60s
    fault: {ref: outage, operation: "*", error: Unavailable}
  - at: 90s
    quotas: {attachments: 5}
  - at: 105s
    deleteFault: outage
  - at: 106s
    deleteFault: outage
    note: fails (already gone), the run goes on
  - at: 110s
    fault: {operation: AttachVolume, error: Throttled}
  - at: 120s
    clearFaults: true
`))
	if err != nil {
		t.Fatal(err)
	}
	admin := startCloud(t)
	clock := time.Unix(1000, 0)
	var ran []string
	r := scenario.Runner{
		API: admin,
		Now: func() time.Time { return clock },
		Sleep: func(_ context.Context, d time.Duration) error {
			clock = clock.Add(d)
			return nil
		},
		Report: func(at time.Duration, s scenario.Step, err error) {
			f := strings.Fields(s.Describe()) // method and path
			ran = append(ran, at.String()+" "+f[0]+" "+f[1]+" "+errString(err))
		},
	}
	err = r.Run(context.Background(), sc)
	if err == nil || !strings.Contains(err.Error(), "1 of 7 steps failed") {
		t.Fatalf("Run: %v, want one failed step", err)
	}
	want := []string{
		"30s PATCH /v1/instances/node-a ok", "1m0s POST /v1/faults ok", "1m30s PATCH /v1/quotas ok",
		"1m45s DELETE /v1/faults/{outage} ok", "1m46s DELETE /v1/faults/{outage} FaultNotFound", "1m50s POST /v1/faults ok",
		"2m0s DELETE /v1/faults ok",
	}
	if strings.Join(ran, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ran:\n%s\nwant:\n%s", strings.Join(ran, "\n"), strings.Join(want, "\n"))
	}
	ctx := context.Background()
	if inst, err := admin.GetInstance(ctx, "node-a"); err != nil || inst.OutOfBandSlots != 3 {
		t.Errorf("node-a: %+v, %v", inst, err)
	}
	if q, err := admin.GetQuotas(ctx); err != nil || q.Attachments.Limit != 5 {
		t.Errorf("quotas: %+v, %v", q, err)
	}
	events, err := admin.ListEvents(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, " "); !strings.Contains(got, "InstancePatched FaultCreated QuotasChanged FaultDeleted FaultCreated FaultsCleared") {
		t.Errorf("events %s: the steps are not all in the log, in order", got)
	}
}

func TestRunStopsWithTheContext(t *testing.T) {
	sc, err := scenario.Parse([]byte("name: x\nsteps:\n  - at: 1h\n    reset: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := scenario.Runner{API: nil, Sleep: func(ctx context.Context, _ time.Duration) error { return context.Canceled }}
	if err := r.Run(context.Background(), sc); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	} else if !strings.Contains(err.Error(), "the steps before it stay applied (POST /v1/reset goes back to the seed)") {
		t.Errorf("Run: %v, want it to say the cloud keeps the earlier steps and how to go back", err)
	}
}

// TestRunSaysWhatItWaitsFor: Waiting hears of the next step when a wait longer than
// ProgressEvery begins and then every ProgressEvery up to the step (the last 5 s too), so no
// silence exceeds it; a wait shorter than ProgressEvery needs no line.
func TestRunSaysWhatItWaitsFor(t *testing.T) {
	sc, err := scenario.Parse([]byte(`name: w
steps:
  - at: 5s
    quotas: {attachments: 3}
  - at: 60s
    quotas: {attachments: 4}
  - at: 60s
    quotas: {attachments: 5}
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	var log []string
	r := scenario.Runner{
		API: startCloud(t),
		Now: func() time.Time { return clock },
		Sleep: func(_ context.Context, d time.Duration) error {
			clock = clock.Add(d)
			return nil
		},
		ProgressEvery: 10 * time.Second,
		Report: func(at time.Duration, s scenario.Step, err error) {
			log = append(log, "ran "+at.String()+" "+errString(err))
		},
		Waiting: func(next scenario.Step, at, in time.Duration) {
			log = append(log, "wait "+at.String()+" in "+in.String())
		},
	}
	if err := r.Run(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"ran 5s ok", "wait 1m0s in 55s", "wait 1m0s in 45s", "wait 1m0s in 35s", "wait 1m0s in 25s", "wait 1m0s in 15s",
		"wait 1m0s in 5s", "ran 1m0s ok", "ran 1m0s ok"}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunStopsAtARefusedToken: a step the cloud refuses for the token (401 or 403) ends the
// run with an AuthError; the steps after it are not tried.
func TestRunStopsAtARefusedToken(t *testing.T) {
	sc, err := scenario.Parse([]byte("name: x\nsteps:\n  - at: 0s\n    quotas: {attachments: 3}\n  - at: 1s\n    reset: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []cloud.Code{cloud.CodeUnauthenticated, cloud.CodeAccessDenied} {
		t.Run(string(code), func(t *testing.T) {
			api := &refusingAPI{err: cloud.NewError(code, "no")}
			r := scenario.Runner{API: api, Sleep: func(context.Context, time.Duration) error { return nil }}
			err := r.Run(context.Background(), sc)
			var ae *scenario.AuthError
			if !errors.As(err, &ae) || cloud.CodeOf(err) != code || !strings.Contains(err.Error(), "token rejected") {
				t.Fatalf("Run: %v, want an AuthError of %s", err, code)
			}
			if api.calls != 1 {
				t.Fatalf("%d calls, want 1: the run must stop at the refused step", api.calls)
			}
		})
	}
}

// refusingAPI answers every call with err.
type refusingAPI struct {
	err   error
	calls int
}

func (a *refusingAPI) PatchInstance(context.Context, string, cloud.InstancePatch) (*cloud.Instance, error) {
	a.calls++
	return nil, a.err
}
func (a *refusingAPI) PatchQuotas(context.Context, cloud.QuotasPatch) (*cloud.Quotas, error) {
	a.calls++
	return nil, a.err
}
func (a *refusingAPI) CreateFault(context.Context, cloud.FaultRule) (*cloud.FaultRule, error) {
	a.calls++
	return nil, a.err
}
func (a *refusingAPI) DeleteFault(context.Context, string) error { a.calls++; return a.err }
func (a *refusingAPI) ClearFaults(context.Context) error         { a.calls++; return a.err }
func (a *refusingAPI) Reset(context.Context) error               { a.calls++; return a.err }

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return string(cloud.CodeOf(err))
}

func startCloud(t *testing.T) *admin.Client {
	t.Helper()
	seed := server.Seed{
		InstanceTypes: []cloud.InstanceType{{Name: "small", MaxAttachments: 4}},
		Instances:     nil,
	}
	srv, err := server.New(server.Config{Auth: server.AuthNone, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = srv.Close()
	})
	c, err := admin.NewClient("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateInstance(context.Background(), cloud.CreateInstanceRequest{ID: "node-a", Zone: "zone-a", InstanceType: "small"}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMapInstances(t *testing.T) {
	sc, err := scenario.Parse([]byte(`name: x
steps:
  - at: 1s
    instance: {id: node-a2, outOfBandSlots: 3}
  - at: 2s
    fault: {operation: AttachVolume, instanceId: node-a2, error: Throttled}
  - at: 3s
    instance: {id: node-b1, outOfBandSlots: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := scenario.ParseInstanceMap([]string{"node-a2=node-1"})
	if err != nil {
		t.Fatal(err)
	}
	sc.MapInstances(m)
	if sc.Steps[0].Instance.ID != "node-1" || sc.Steps[1].Fault.InstanceID != "node-1" || sc.Steps[2].Instance.ID != "node-b1" {
		t.Fatalf("mapped: %s", sc)
	}
	if _, err := scenario.ParseInstanceMap([]string{"node-a2", "=x", "a=b"}); err == nil || strings.Count(err.Error(), "want FROM=TO") != 2 {
		t.Fatalf("ParseInstanceMap: %v, want two refused pairs", err)
	}
}
