package stack

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// recorder is a Launcher that records what it was asked to start and fails for one ID.
type recorder struct {
	started []Component
	fail    string
}

func (r *recorder) Launch(_ context.Context, c Component) error {
	if c.ID == r.fail {
		return errors.New("exec: no such file")
	}
	r.started = append(r.started, c)
	return nil
}

func TestRunStopsAtTheFirstFailingStep(t *testing.T) {
	var log []string
	step := func(name string, startErr, readyErr error) Step {
		return Step{Name: name,
			Start: func(context.Context) error { log = append(log, "start "+name); return startErr },
			Ready: func(context.Context) error { log = append(log, "ready "+name); return readyErr },
		}
	}
	tests := []struct {
		name    string
		steps   []Step
		wantLog []string
		wantErr string
		done    []string
	}{
		{"all ready in order", []Step{step("a", nil, nil), step("b", nil, nil)},
			[]string{"start a", "ready a", "start b", "ready b"}, "", []string{"a", "b"}},
		{"a start fails: no readiness wait, no later step", []Step{step("a", errors.New("boom"), nil), step("b", nil, nil)},
			[]string{"start a"}, "a: boom", nil},
		{"a readiness fails: no later step", []Step{step("a", nil, nil), step("b", nil, errors.New("timed out")), step("c", nil, nil)},
			[]string{"start a", "ready a", "start b", "ready b"}, "b not ready: timed out", []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log = nil
			var done []string
			err := Run(context.Background(), tt.steps, func(name string, _ time.Duration) { done = append(done, name) })
			if got := errString(err); got != tt.wantErr {
				t.Errorf("Run error %q, want %q", got, tt.wantErr)
			}
			if !reflect.DeepEqual(log, tt.wantLog) || !reflect.DeepEqual(done, tt.done) {
				t.Errorf("Run ran %q and reported %q done, want %q and %q", log, done, tt.wantLog, tt.done)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"fake cloud, everything", Cloud{Listen: "127.0.0.1:8080", DataDir: "/r/cloud", Seed: "seed.yaml", TokensFile: "tokens.yaml",
			ConsoleNodes: []ConsoleNode{{"n1", "http://127.0.0.1:9809"}}, ConsoleKubeconfig: "/r/kc", Verbosity: 4, Extra: []string{"--max-events=100"}}.Args(),
			[]string{"--listen=127.0.0.1:8080", "--data-dir=/r/cloud", "--seed=seed.yaml", "--auth=tokens", "--tokens-file=tokens.yaml",
				"--console-node=n1=http://127.0.0.1:9809", "--console-kubeconfig=/r/kc", "--v=4", "--max-events=100"}},
		{"fake cloud, the least", Cloud{Listen: "127.0.0.1:1"}.Args(), []string{"--listen=127.0.0.1:1"}},
		{"node plugin", Plugin{Mode: "node", NodeID: "n1", Socket: "/r/n1/csi.sock", CloudURL: "http://127.0.0.1:8080", CloudTokenFile: "/r/tok",
			StateDir: "/r/n1", HTTPAddr: "127.0.0.1:9809", CapacityMinInterval: time.Second, Extra: []string{"--capacity-max-step=0"}}.Args(),
			[]string{"--mode=node", "--node-id=n1", "--endpoint=unix:///r/n1/csi.sock", "--cloud-url=http://127.0.0.1:8080", "--cloud-token-file=/r/tok",
				"--state-dir=/r/n1", "--http-addr=127.0.0.1:9809", "--capacity-min-interval=1s", "--capacity-max-step=0"}},
		{"controller plugin with a cluster's folders", Plugin{Mode: "controller", Socket: "/r/c.sock", StateDir: "/r/s", VolumeDataDir: "/r/v",
			KubeletRoot: "/r/k", Kubeconfig: "/r/kc", NodeName: "n", Verbosity: 2}.Args(),
			[]string{"--mode=controller", "--endpoint=unix:///r/c.sock", "--state-dir=/r/s", "--kubelet-root=/r/k", "--volume-data-dir=/r/v",
				"--kubeconfig=/r/kc", "--node-name=n", "--v=2"}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: Args\n got %q\nwant %q", tt.name, tt.got, tt.want)
		}
	}
}

// The steps start the fake cloud, then the plugins in the stack's order, each launched with
// its flags; a launch that fails names the component and stops the start.
func TestStepsOrderAndLaunchFailure(t *testing.T) {
	s := Stack{
		Cloud:   Cloud{Listen: "127.0.0.1:1"},
		Plugins: []Plugin{{Name: "controller plugin", ID: "controller", Mode: "controller", Socket: "/c"}, {Name: "node plugin n1", ID: "n1", Mode: "node", Socket: "/n1"}},
	}
	r := &recorder{}
	steps := s.Steps(r)
	var names []string
	for _, st := range steps {
		names = append(names, st.Name)
		if err := st.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"fake cloud", "controller plugin", "node plugin n1"}; !reflect.DeepEqual(names, want) {
		t.Errorf("steps %q, want %q", names, want)
	}
	if got := r.started[2]; got.Program != ProgramDriver || got.ID != "n1" || !reflect.DeepEqual(got.Args, s.Plugins[1].Args()) {
		t.Errorf("third launch %+v, want the driver with node plugin n1's flags", got)
	}
	if r.started[0].Program != ProgramFakeCloud || r.started[0].ID != "fakecloud" {
		t.Errorf("first launch %+v, want the fake cloud", r.started[0])
	}
	err := Run(context.Background(), s.Steps(&recorder{fail: "fakecloud"}), nil)
	if err == nil || !strings.Contains(err.Error(), "fake cloud: launch fakecloud: exec: no such file") {
		t.Errorf("Run with a failing launch = %v", err)
	}
}

func TestWaitHTTP(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		if calls < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if err := WaitHTTP(context.Background(), srv.URL, 10*time.Second); err != nil || calls != 3 {
		t.Errorf("WaitHTTP = %v after %d calls, want ready at the third", err, calls)
	}
	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer never.Close()
	err := WaitHTTP(context.Background(), never.URL, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "timed out after 100ms") || !strings.Contains(err.Error(), "503") {
		t.Errorf("WaitHTTP of a server never ready = %v, want a timeout naming the 503", err)
	}
}
