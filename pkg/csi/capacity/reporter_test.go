package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// CapacityReporter is the interface the CSI node service declares; the reporter must
// implement it exactly.
type CapacityReporter interface {
	MaxVolumesPerNode(ctx context.Context) (int64, error)
	DebugState() any
}

var _ CapacityReporter = (*Reporter)(nil)

// fakeSource is an in-memory Source: it answers with its current capacity or error, counts
// calls, and can hold every call until gate is closed.
type fakeSource struct {
	mu      sync.Mutex
	calls   int
	c       *cloud.Capacity
	err     error
	gate    chan struct{}
	entered chan struct{}
}

func newFakeSource(c *cloud.Capacity) *fakeSource {
	return &fakeSource{c: c, entered: make(chan struct{}, 100)}
}

func (f *fakeSource) GetCapacity(ctx context.Context, instanceID string) (*cloud.Capacity, error) {
	f.mu.Lock()
	f.calls++
	gate := f.gate
	f.mu.Unlock()
	select {
	case f.entered <- struct{}{}:
	default: // nobody waits for this many lookups; long runs must not block here
	}
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	c := *f.c
	c.InstanceID = instanceID
	return &c, nil
}

func (f *fakeSource) set(c *cloud.Capacity, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.c, f.err = c, err
}

func (f *fakeSource) hold() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = make(chan struct{})
	return f.gate
}

func (f *fakeSource) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func newTestReporter(t *testing.T, cfg Config, src Source) (*Reporter, *clocktesting.FakeClock, *prometheus.Registry) {
	t.Helper()
	return newCountedReporter(t, cfg, src, nil)
}

// newCountedReporter is newTestReporter with the node's live count here. It runs the
// start-up step Restore, as Driver.Run does before serving.
func newCountedReporter(t *testing.T, cfg Config, src Source, here AttachedHereFunc) (*Reporter, *clocktesting.FakeClock, *prometheus.Registry) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	r, err := NewReporter(cfg, src, "i-1", here, clk, reg)
	if err != nil {
		t.Fatalf("NewReporter: %v", err)
	}
	r.Restore(context.Background())
	return r, clk, reg
}

func mustValue(t *testing.T, r *Reporter) int64 {
	t.Helper()
	v, err := r.MaxVolumesPerNode(context.Background())
	if err != nil {
		t.Fatalf("MaxVolumesPerNode: %v", err)
	}
	return v
}

func TestReporterCachesWithMinIntervalAndJitter(t *testing.T) {
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	r, clk, _ := newTestReporter(t, DefaultConfig(), src)
	if got := mustValue(t, r); got != 15 {
		t.Fatalf("first value = %d, want 15", got)
	}
	src.set(reading(8, 1, 3, 100, 2), nil)
	clk.Step(DefaultMinInterval - time.Millisecond)
	for range 5 {
		if got := mustValue(t, r); got != 15 {
			t.Fatalf("cached value = %d, want 15", got)
		}
	}
	if n := src.callCount(); n != 1 {
		t.Fatalf("lookups within the min interval = %d, want 1", n)
	}
	// The jitter adds at most 20% of the interval.
	clk.Step(time.Duration(float64(DefaultMinInterval)*DefaultJitter) + 2*time.Millisecond)
	if got := mustValue(t, r); got != 7 {
		t.Fatalf("value after the interval = %d, want 7", got)
	}
	if n := src.callCount(); n != 2 {
		t.Fatalf("lookups = %d, want 2", n)
	}
}

func TestReporterCollapsesConcurrentLookups(t *testing.T) {
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	release := src.hold()
	r, _, _ := newTestReporter(t, DefaultConfig(), src)
	const callers = 32
	results := make(chan int64, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			v, _ := r.MaxVolumesPerNode(context.Background())
			results <- v
		})
	}
	<-src.entered // one lookup is in flight; the fake clock never reaches the answer bound
	close(release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != 15 {
			t.Errorf("a caller got %d, want 15", v)
		}
	}
	if n := src.callCount(); n != 1 {
		t.Errorf("lookups = %d for %d concurrent callers, want 1", n, callers)
	}
}

func TestReporterDoesNotBlockPastTheBound(t *testing.T) {
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	r, clk, _ := newTestReporter(t, DefaultConfig(), src)
	if got := mustValue(t, r); got != 15 {
		t.Fatalf("first value = %d, want 15", got)
	}
	release := src.hold()
	src.set(reading(16, 1, 3, 100, 2), nil)
	clk.Step(time.Minute)
	got := make(chan int64, 1)
	go func() {
		v, _ := r.MaxVolumesPerNode(context.Background())
		got <- v
	}()
	<-src.entered
	for !clk.HasWaiters() { // the caller is now waiting for the bound
		time.Sleep(time.Millisecond)
	}
	clk.Step(DefaultAnswerBound)
	if v := <-got; v != 15 {
		t.Errorf("value while the cloud is slow = %d, want the last known good 15", v)
	}
	if n := src.callCount(); n != 2 {
		t.Errorf("lookups = %d, want 2", n)
	}
	close(release)
}

func TestReporterAnswersWhenCallerContextEnds(t *testing.T) {
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	release := src.hold()
	defer close(release)
	r, _, _ := newTestReporter(t, DefaultConfig(), src)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan int64, 1)
	go func() {
		v, _ := r.MaxVolumesPerNode(ctx)
		got <- v
	}()
	<-src.entered
	cancel()
	if v := <-got; v != 1 {
		t.Errorf("value with nothing known = %d, want 1", v)
	}
}

func TestReporterErrorsHoldThenFloor(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantNext int64
		wantMode Mode
		class    ErrorClass
	}{
		{"access denied", cloud.NewError(cloud.CodeAccessDenied, "no"), 15, ModeLastKnownGood, ClassPermission},
		{"unauthenticated", cloud.NewError(cloud.CodeUnauthenticated, "no"), 15, ModeLastKnownGood, ClassAuth},
		{"instance not found", cloud.NewError(cloud.CodeInstanceNotFound, "gone"), 15, ModeLastKnownGood, ClassNotFound},
		{"throttled", cloud.NewError(cloud.CodeThrottled, "slow down"), 15, ModeLastKnownGood, ClassThrottled},
		{"unavailable", cloud.NewError(cloud.CodeUnavailable, "down"), 15, ModeLastKnownGood, ClassServer},
		{"network", errors.New("dial tcp 127.0.0.1:1: connection refused"), 15, ModeLastKnownGood, ClassNetwork},
		{"timeout", context.DeadlineExceeded, 15, ModeLastKnownGood, ClassTimeout},
		{"cloud says full", cloud.NewError(cloud.CodeAttachmentLimitExceeded, "full"), 3, ModeFloor, ClassCapacity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource(reading(16, 1, 3, 100, 1))
			r, clk, reg := newTestReporter(t, DefaultConfig(), src)
			mustValue(t, r)
			src.set(nil, tc.err)
			clk.Step(10 * time.Second)
			if got := mustValue(t, r); got != tc.wantNext {
				t.Errorf("value after the error = %d, want %d", got, tc.wantNext)
			}
			d := r.DebugState().(DebugInfo)
			if d.Mode != tc.wantMode || d.LastErrorClass != tc.class {
				t.Errorf("debug state mode %s class %q, want %s %q", d.Mode, d.LastErrorClass, tc.wantMode, tc.class)
			}
			if got := testutil.ToFloat64(r.m.lookupErrors.WithLabelValues(string(tc.class))); got != 1 {
				t.Errorf("lookup errors{class=%s} = %v, want 1", tc.class, got)
			}
			clk.Step(DefaultStaleAfter)
			if got := mustValue(t, r); got != 3 {
				t.Errorf("value after stale-after = %d, want the floor 3", got)
			}
			want := `
# HELP fakecloud_csi_capacity_mode 1 for the current policy mode (fresh, last-known-good, floor, ramping), 0 for the others.
# TYPE fakecloud_csi_capacity_mode gauge
fakecloud_csi_capacity_mode{mode="fresh"} 0
fakecloud_csi_capacity_mode{mode="floor"} 1
fakecloud_csi_capacity_mode{mode="last-known-good"} 0
fakecloud_csi_capacity_mode{mode="ramping"} 0
# HELP fakecloud_csi_capacity_reported Value last reported as NodeGetInfo.max_volumes_per_node, in attach slots.
# TYPE fakecloud_csi_capacity_reported gauge
fakecloud_csi_capacity_reported 3
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fakecloud_csi_capacity_mode", "fakecloud_csi_capacity_reported"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestReporterThrottleRetryAfterDelaysNextLookup(t *testing.T) {
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	r, clk, _ := newTestReporter(t, DefaultConfig(), src)
	e := cloud.NewError(cloud.CodeThrottled, "slow down")
	e.RetryAfter = 40 * time.Second
	src.set(nil, e)
	mustValue(t, r)
	src.set(reading(16, 1, 3, 100, 1), nil)
	clk.Step(39 * time.Second)
	mustValue(t, r)
	if n := src.callCount(); n != 1 {
		t.Fatalf("lookups before Retry-After = %d, want 1", n)
	}
	clk.Step(time.Second)
	if got := mustValue(t, r); got != 15 || src.callCount() != 2 {
		t.Fatalf("after Retry-After: value %d lookups %d, want 15 and 2", got, src.callCount())
	}
}

func TestReporterPersistsAndRestores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "capacity.json")
	cfg := DefaultConfig()
	cfg.StatePath = path

	src := newFakeSource(reading(10, 1, 4, 100, 7))
	r1, clk, _ := newTestReporter(t, cfg, src)
	if got := mustValue(t, r1); got != 9 {
		t.Fatalf("first plugin value = %d, want 9", got)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	var s PersistedState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("state file %q: %v", b, err)
	}
	if s.Reported != 9 || s.Revision != 7 || s.Attached != 4 || s.InstanceID != "i-1" || !s.GoodAt.Equal(t0) {
		t.Fatalf("persisted %+v", s)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	tests := []struct {
		name     string
		after    time.Duration
		read     *cloud.Capacity
		err      error
		want     int64
		wantMode Mode
	}{
		{"cloud down: last known good with its age", time.Minute, nil, cloud.NewError(cloud.CodeUnavailable, "down"), 9, ModeLastKnownGood},
		{"older revision after a cloud rollback is ignored", time.Minute, reading(16, 1, 4, 100, 6), nil, 9, ModeLastKnownGood},
		{"lower truth at a newer revision applies", time.Minute, reading(6, 1, 4, 100, 8), nil, 5, ModeFresh},
		{"higher truth ramps", time.Minute, reading(16, 1, 4, 100, 8), nil, 9, ModeRamping},
		{"state older than stale-after: floor", 10 * time.Minute, nil, cloud.NewError(cloud.CodeUnavailable, "down"), 4, ModeFloor},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource(tc.read)
			src.err = tc.err
			// Each restart gets its own copy: a restarted reporter persists what it learns.
			cfg2 := cfg
			cfg2.StatePath = filepath.Join(t.TempDir(), "capacity.json")
			if err := os.WriteFile(cfg2.StatePath, b, 0o600); err != nil {
				t.Fatal(err)
			}
			clk2 := clocktesting.NewFakeClock(clk.Now().Add(tc.after))
			r2, err := NewReporter(cfg2, src, "i-1", nil, clk2, prometheus.NewRegistry())
			if err != nil {
				t.Fatalf("NewReporter: %v", err)
			}
			r2.Restore(context.Background())
			if got := mustValue(t, r2); got != tc.want {
				t.Errorf("restarted value = %d, want %d", got, tc.want)
			}
			if d := r2.DebugState().(DebugInfo); d.Mode != tc.wantMode || d.RestoredAtStart != "restored" || d.StatePath != cfg2.StatePath {
				t.Errorf("debug state %+v, want mode %s, restoredAtStart restored", d, tc.wantMode)
			}
		})
	}
}

// NewReporter reads nothing (constructors do no I/O): the state file counts from Restore on,
// and only its first call, made before any lookup, reads it.
func TestReporterReadsTheStateInRestoreOnly(t *testing.T) {
	saved := PersistedState{Version: 1, InstanceID: "i-1", Reported: 9, Revision: 7, Attached: 4, GoodAt: t0}
	down := cloud.NewError(cloud.CodeUnavailable, "down")
	for _, tc := range []struct {
		name         string
		restore      int  // calls of Restore
		lookupFirst  bool // a lookup before the first Restore
		wantNote     string
		wantValue    int64
		wantMode     Mode
		wantReported float64 // fakecloud_csi_capacity_reported before any NodeGetInfo
	}{
		{"not restored", 0, false, "nothing yet: Restore has not run", 1, ModeFloor, 1},
		{"restored", 1, false, "restored", 9, ModeLastKnownGood, 9},
		{"restored once", 2, false, "restored", 9, ModeLastKnownGood, 9},
		{"after a lookup", 1, true, "nothing: a lookup came first", 1, ModeFloor, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.StatePath = filepath.Join(t.TempDir(), "capacity.json")
			if err := saveState(cfg.StatePath, saved); err != nil {
				t.Fatal(err)
			}
			src := newFakeSource(nil)
			src.err = down
			r, err := NewReporter(cfg, src, "i-1", nil, clocktesting.NewFakeClock(t0.Add(time.Minute)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.lookupFirst {
				mustValue(t, r)
			}
			for range tc.restore {
				r.Restore(context.Background())
			}
			if got := testutil.ToFloat64(r.m.reported); !tc.lookupFirst && got != tc.wantReported {
				t.Errorf("reported gauge before any answer = %v, want %v", got, tc.wantReported)
			}
			if got := mustValue(t, r); got != tc.wantValue {
				t.Errorf("value = %d, want %d", got, tc.wantValue)
			}
			if d := r.DebugState().(DebugInfo); d.RestoredAtStart != tc.wantNote || d.Mode != tc.wantMode {
				t.Errorf("restoredAtStart %q mode %s, want %q %s", d.RestoredAtStart, d.Mode, tc.wantNote, tc.wantMode)
			}
		})
	}
}

func TestReporterIgnoresBadStateFiles(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{"corrupt", "{not json"},
		{"another instance", `{"version":1,"instanceId":"i-2","reported":9,"revision":3,"attached":1,"goodAt":"2026-11-29T12:00:00Z"}`},
		{"zero value", `{"version":1,"instanceId":"i-1","reported":0,"revision":3,"attached":1,"goodAt":"2026-11-29T12:00:00Z"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "capacity.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.StatePath = path
			src := newFakeSource(nil)
			src.err = cloud.NewError(cloud.CodeUnavailable, "down")
			r, _, _ := newTestReporter(t, cfg, src)
			if got := mustValue(t, r); got != 1 {
				t.Errorf("value = %d, want 1 (nothing known)", got)
			}
			if d := r.DebugState().(DebugInfo); !strings.HasPrefix(d.RestoredAtStart, "nothing, ignored: ") {
				t.Errorf("bad state file: restoredAtStart %q, want it ignored with the reason", d.RestoredAtStart)
			}
		})
	}
}

func TestReporterMetricsCountChanges(t *testing.T) {
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	r, clk, _ := newTestReporter(t, DefaultConfig(), src)
	mustValue(t, r)
	for i, lim := range []int{16, 8, 8, 6, 6} {
		src.set(reading(lim, 1, 3, 100, uint64(i+2)), nil)
		clk.Step(10 * time.Second)
		mustValue(t, r)
	}
	if got := testutil.ToFloat64(r.m.changes); got != 2 {
		t.Errorf("value changes = %v, want 2 (15→7→5)", got)
	}
	if got := testutil.ToFloat64(r.m.raw); got != 5 {
		t.Errorf("raw = %v, want 5", got)
	}
	if got := testutil.ToFloat64(r.m.goodAge); got != 0 {
		t.Errorf("last good age = %v, want 0", got)
	}
	clk.Step(3 * time.Second)
	if got := testutil.ToFloat64(r.m.goodAge); got != 3 {
		t.Errorf("last good age = %v, want 3", got)
	}
}

func TestReporterDebugStateIsJSON(t *testing.T) {
	src := newFakeSource(reading(16, 1, 3, 100, 5))
	r, _, _ := newTestReporter(t, DefaultConfig(), src)
	mustValue(t, r)
	b, err := json.Marshal(r.DebugState())
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"mode": "fresh", "reported": 15.0, "raw": 15.0, "revision": 5.0, "lastGoodAgeSeconds": 0.0} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v (in %s)", k, m[k], want, b)
		}
	}
	if in, ok := m["inputs"].(map[string]any); !ok || in["attachLimit"] != 16.0 {
		t.Errorf("inputs = %v, want the last reading", m["inputs"])
	}
}

// restoredAtStart is the outcome of the restore at start, not the file now: a plugin that
// started without a state file says so after it has written one.
func TestReporterDebugStateSaysWhatWasRestoredAtStart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		statePath bool
		want      string
	}{
		{"no state path", false, "nothing: no state path"},
		{"no state file at start, written since", true, "nothing: no state file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.statePath {
				cfg.StatePath = filepath.Join(t.TempDir(), "capacity.json")
			}
			r, _, _ := newTestReporter(t, cfg, newFakeSource(reading(16, 1, 3, 100, 5)))
			mustValue(t, r)
			if tc.statePath {
				if _, err := os.Stat(cfg.StatePath); err != nil {
					t.Fatalf("state file after a reading: %v", err)
				}
			}
			b, err := json.Marshal(r.DebugState())
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if m["restoredAtStart"] != tc.want {
				t.Errorf("restoredAtStart = %v, want %q (in %s)", m["restoredAtStart"], tc.want, b)
			}
			if _, ok := m["state"]; ok {
				t.Errorf("the ambiguous field \"state\" is still there: %s", b)
			}
		})
	}
}

func TestReporterRunRefreshes(t *testing.T) {
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	r, clk, _ := newTestReporter(t, DefaultConfig(), src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-src.entered
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	src.set(reading(8, 1, 3, 100, 2), nil)
	clk.Step(DefaultMinInterval * 2)
	<-src.entered
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if got := r.DebugState().(DebugInfo).Reported; got != 7 {
		t.Errorf("reported after a background refresh = %d, want 7", got)
	}
}

func TestNewReporterValidates(t *testing.T) {
	bad := DefaultConfig()
	bad.StaleAfter = 0
	bad.Jitter = 2
	bad.QuotaShare = "half"
	_, err := NewReporter(bad, nil, "", nil, nil, nil)
	if err == nil {
		t.Fatal("NewReporter with a bad config = nil error")
	}
	for _, want := range []string{"stale-after", "jitter", "quota-share", "source is nil", "instance ID is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	reg := prometheus.NewRegistry()
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	if _, err := NewReporter(DefaultConfig(), src, "i-1", nil, nil, reg); err != nil {
		t.Fatalf("first reporter: %v", err)
	}
	if _, err := NewReporter(DefaultConfig(), src, "i-1", nil, nil, reg); err == nil {
		t.Error("second reporter on the same registerer = nil error, want a registration error")
	}
	if n := src.callCount(); n != 0 {
		t.Errorf("constructors called the cloud %d times", n)
	}
}

func TestReporterAcceptsANewEpochAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capacity.json")
	old := PersistedState{Version: 1, InstanceID: "i-1", Reported: 9, Revision: 900, Epoch: "epoch-a", Attached: 4, GoodAt: t0.Add(-time.Minute)}
	if err := saveState(path, old); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.StatePath = path
	// The cloud restarted on an empty data dir: a new epoch, revisions from 0 again.
	src := newFakeSource(inEpoch(reading(6, 1, 2, 100, 3), "epoch-b"))
	r, clk, _ := newTestReporter(t, cfg, src)
	if got := mustValue(t, r); got != 5 {
		t.Fatalf("value from the new epoch = %d, want 5 (not the floor, not the old value)", got)
	}
	d := r.DebugState().(DebugInfo)
	if d.Mode != ModeFresh || d.Epoch != "epoch-b" || d.Revision != 3 {
		t.Errorf("debug state mode %s epoch %q revision %d, want fresh epoch-b 3", d.Mode, d.Epoch, d.Revision)
	}
	s, ok, err := loadState(path)
	if err != nil || !ok || s.Epoch != "epoch-b" || s.Revision != 3 || s.Reported != 5 {
		t.Fatalf("persisted %+v (%v, %v), want epoch-b revision 3 reported 5", s, ok, err)
	}
	// Within the new epoch, a late older reading is still ignored.
	src.set(inEpoch(reading(16, 1, 2, 100, 2), "epoch-b"), nil)
	clk.Step(time.Minute)
	mustValue(t, r)
	if d := r.DebugState().(DebugInfo); d.LastErrorClass != ClassStaleRevision || d.Reported != 5 {
		t.Errorf("older reading of the same epoch: class %q reported %d, want %q 5", d.LastErrorClass, d.Reported, ClassStaleRevision)
	}
}

func TestReporterFloorFollowsTheNodesCount(t *testing.T) {
	src := newFakeSource(reading(16, 1, 6, 100, 1))
	var mu sync.Mutex
	count, countErr := 6, error(nil)
	r, clk, _ := newCountedReporter(t, DefaultConfig(), src, func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return count, countErr
	})
	set := func(n int, err error) {
		mu.Lock()
		defer mu.Unlock()
		count, countErr = n, err
	}
	if got := mustValue(t, r); got != 15 {
		t.Fatalf("first value = %d, want 15", got)
	}
	src.set(nil, cloud.NewError(cloud.CodeUnavailable, "down"))
	set(3, nil) // pods ended while the cloud cannot be read
	clk.Step(DefaultStaleAfter + time.Second)
	if got := mustValue(t, r); got != 3 {
		t.Errorf("floor = %d, want the node's count 3 (not the last reading's 6)", got)
	}
	if d := r.DebugState().(DebugInfo); d.AttachedHere == nil || *d.AttachedHere != 3 || d.Mode != ModeFloor {
		t.Errorf("debug state attachedHere %v mode %s, want 3 floor", d.AttachedHere, d.Mode)
	}
	set(5, nil)
	clk.Step(time.Minute)
	if got := mustValue(t, r); got != 3 {
		t.Errorf("floor after the count rose = %d, want 3 (never raised while the truth is unknown)", got)
	}
	set(0, nil)
	clk.Step(time.Minute)
	if got := mustValue(t, r); got != 1 {
		t.Errorf("floor with nothing here = %d, want 1 (never 0)", got)
	}
}

func TestReporterFloorWithoutACount(t *testing.T) {
	src := newFakeSource(reading(16, 1, 6, 100, 1))
	r, clk, _ := newCountedReporter(t, DefaultConfig(), src, func() (int, error) { return 0, errors.New("state dir unreadable") })
	mustValue(t, r)
	src.set(nil, cloud.NewError(cloud.CodeUnavailable, "down"))
	clk.Step(DefaultStaleAfter + time.Second)
	if got := mustValue(t, r); got != 6 {
		t.Errorf("floor = %d, want the last reading's count 6 when the node cannot count", got)
	}
	if d := r.DebugState().(DebugInfo); d.AttachedHere != nil {
		t.Errorf("debug state attachedHere = %d, want none", *d.AttachedHere)
	}
}

func TestReporterMetricsShowTheCloudTruth(t *testing.T) {
	src := newFakeSource(reading(16, 2, 3, 40, 1))
	r, clk, reg := newTestReporter(t, DefaultConfig(), src)
	mustValue(t, r)
	want := map[string]float64{
		"fakecloud_csi_capacity_cloud_attach_limit":      16,
		"fakecloud_csi_capacity_cloud_out_of_band_slots": 2,
		"fakecloud_csi_capacity_cloud_attached":          3,
		"fakecloud_csi_capacity_cloud_quota_headroom":    40,
		"fakecloud_csi_capacity_dynamic":                 1,
	}
	check := func() {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			if _, ok := want[mf.GetName()]; ok {
				got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s = %v, want %v", name, got[name], w)
			}
		}
	}
	check()
	// A failed lookup leaves the truth of the last accepted reading.
	src.set(nil, cloud.ErrUnavailable)
	clk.Step(10 * time.Second)
	mustValue(t, r)
	check()
	src.set(reading(8, 1, 4, 10, 2), nil)
	clk.Step(10 * time.Second)
	mustValue(t, r)
	want["fakecloud_csi_capacity_cloud_attach_limit"] = 8
	want["fakecloud_csi_capacity_cloud_out_of_band_slots"] = 1
	want["fakecloud_csi_capacity_cloud_attached"] = 4
	want["fakecloud_csi_capacity_cloud_quota_headroom"] = 10
	check()
	info := `
# HELP fakecloud_csi_capacity_node_info Always 1; node_id is the cloud instance ID this node plugin reports for (join key with fakecloud_instance_* series).
# TYPE fakecloud_csi_capacity_node_info gauge
fakecloud_csi_capacity_node_info{node_id="i-1"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(info), "fakecloud_csi_capacity_node_info"); err != nil {
		t.Error(err)
	}
}

// Before the first reading the metrics show what NodeGetInfo would answer (docs/metrics.md):
// 1 at the floor with no state, the restored value as last known good with one, and still
// 1 at the floor when the first lookups fail.
func TestReporterMetricsBeforeTheFirstReading(t *testing.T) {
	for _, tc := range []struct {
		name     string
		state    *PersistedState
		lookups  int // failed lookups made before the metrics are read
		want     float64
		wantMode Mode
		wantAge  float64
	}{
		{name: "no state", want: 1, wantMode: ModeFloor, wantAge: -1},
		{name: "no state, lookups failing", lookups: 3, want: 1, wantMode: ModeFloor, wantAge: -1},
		{name: "restored", state: &PersistedState{Version: 1, Reported: 9, Revision: 3, Attached: 2, GoodAt: t0.Add(-time.Minute)},
			want: 9, wantMode: ModeLastKnownGood, wantAge: 60},
		{name: "restored, too old", state: &PersistedState{Version: 1, Reported: 9, Revision: 3, Attached: 2, GoodAt: t0.Add(-time.Hour)},
			want: 2, wantMode: ModeFloor, wantAge: 3600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.state != nil {
				cfg.StatePath = filepath.Join(t.TempDir(), "capacity.json")
				s := *tc.state
				s.InstanceID = "i-1"
				if err := saveState(cfg.StatePath, s); err != nil {
					t.Fatal(err)
				}
			}
			src := newFakeSource(nil)
			src.set(nil, cloud.ErrUnavailable)
			r, clk, _ := newTestReporter(t, cfg, src)
			for range tc.lookups {
				mustValue(t, r)
				clk.Step(time.Minute)
				tc.wantAge = -1 // no state: the age stays -1 however long it fails
			}
			if got := testutil.ToFloat64(r.m.reported); got != tc.want {
				t.Errorf("reported = %v, want %v", got, tc.want)
			}
			for _, m := range AllModes() {
				want := 0.0
				if m == tc.wantMode {
					want = 1
				}
				if got := testutil.ToFloat64(r.m.mode.WithLabelValues(string(m))); got != want {
					t.Errorf("mode{%s} = %v, want %v", m, got, want)
				}
			}
			if got := testutil.ToFloat64(r.m.goodAge); got != tc.wantAge {
				t.Errorf("last good age = %v, want %v", got, tc.wantAge)
			}
		})
	}
}

// TestReporterStaleRestoreFloorsOnTheLiveCount: a restored state too old to trust puts the
// node at the floor, and that floor is the node's live staged count (given to New), not the
// restored state's attached count: the start-up metrics must not fix the floor early.
func TestReporterStaleRestoreFloorsOnTheLiveCount(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StatePath = filepath.Join(t.TempDir(), "capacity.json")
	old := PersistedState{Version: 1, InstanceID: "i-1", Reported: 12, Revision: 3, Attached: 5, GoodAt: t0.Add(-time.Hour)}
	if err := saveState(cfg.StatePath, old); err != nil {
		t.Fatal(err)
	}
	src := newFakeSource(nil)
	src.set(nil, cloud.ErrUnavailable) // the cloud cannot be read, attaches went on
	r, _, _ := newCountedReporter(t, cfg, src, func() (int, error) { return 8, nil })
	if got := mustValue(t, r); got != 8 {
		t.Fatalf("floor = %d, want the live count 8 (not the restored state's 5)", got)
	}
}

// Each node's share of the increase spread is fixed by its ID: the same ID always waits
// alike, and a fleet's nodes spread over the whole range instead of raising together.
func TestReporterSpreadsIncreasesByNodeID(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IncreaseSpread = 100 * time.Second
	delay := func(id string) time.Duration {
		t.Helper()
		r, err := NewReporter(cfg, newFakeSource(reading(16, 1, 3, 100, 5)), id, nil, clocktesting.NewFakeClock(t0), nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := time.ParseDuration(r.DebugState().(DebugInfo).IncreaseDelay)
		if err != nil {
			t.Fatalf("%s: increaseDelay: %v", id, err)
		}
		return d
	}
	if a, b := delay("node-7"), delay("node-7"); a != b {
		t.Errorf("node-7 waits %s, then %s: want the same", a, b)
	}
	deciles := map[time.Duration]bool{}
	for i := range 200 {
		d := delay(fmt.Sprintf("node-%d", i))
		if d < 0 || d >= cfg.IncreaseSpread {
			t.Fatalf("node-%d waits %s more, want within [0, %s)", i, d, cfg.IncreaseSpread)
		}
		deciles[d/(cfg.IncreaseSpread/10)] = true
	}
	if len(deciles) != 10 {
		t.Errorf("200 nodes' delays fall in %d of the 10 tenths of the spread, want all", len(deciles))
	}
	cfg.IncreaseSpread = 0
	r, _, _ := newTestReporter(t, cfg, newFakeSource(reading(16, 1, 3, 100, 5)))
	if d := r.DebugState().(DebugInfo); d.IncreaseDelay != "" || d.Config.IncreaseSpread != "" {
		t.Errorf("spread off: increaseDelay %q, config %q, want both absent", d.IncreaseDelay, d.Config.IncreaseSpread)
	}
}
