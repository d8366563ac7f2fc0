package capacity

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

var _ CapacityReporter = (*Static)(nil)

func TestStaticReadsOnceAndNeverChanges(t *testing.T) {
	tests := []struct {
		name     string
		limit    int
		oob      int
		attached int
		headroom int64
		want     int64
	}{
		{name: "slots minus out-of-band", limit: 8, oob: 1, attached: 3, headroom: 100, want: 7},
		{name: "quota and attachments do not count", limit: 8, oob: 1, attached: 7, headroom: 0, want: 7},
		{name: "never zero", limit: 4, oob: 4, want: 1},
		{name: "never negative", limit: 2, oob: 5, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource(reading(tc.limit, tc.oob, tc.attached, tc.headroom, 1))
			reg := prometheus.NewRegistry()
			s, err := NewStatic(src, "i-1", "test", time.Second, reg)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				got, err := s.MaxVolumesPerNode(context.Background())
				if err != nil || got != tc.want {
					t.Fatalf("MaxVolumesPerNode = %d, %v; want %d", got, err, tc.want)
				}
				// The cloud changes; the static count does not follow.
				src.set(reading(tc.limit+10, 0, 0, 1000, 2), nil)
			}
			if n := src.callCount(); n != 1 {
				t.Errorf("cloud lookups = %d, want 1", n)
			}
			if d := s.DebugState().(StaticDebugInfo); d.Reported != tc.want || d.Mode != "static" {
				t.Errorf("DebugState = %+v", d)
			}
			want := `
# HELP fakecloud_csi_capacity_dynamic 1 when the capacity policy drives the reported value (--dynamic-capacity), 0 when a static count read once at start is reported.
# TYPE fakecloud_csi_capacity_dynamic gauge
fakecloud_csi_capacity_dynamic 0
# HELP fakecloud_csi_capacity_reported Value last reported as NodeGetInfo.max_volumes_per_node, in attach slots.
# TYPE fakecloud_csi_capacity_reported gauge
fakecloud_csi_capacity_reported ` + strconv.FormatInt(tc.want, 10) + `
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fakecloud_csi_capacity_dynamic", "fakecloud_csi_capacity_reported"); err != nil {
				t.Error(err)
			}
			if got := testutil.ToFloat64(s.m.cloudLimit); got != float64(tc.limit) {
				t.Errorf("cloud_attach_limit = %v, want %d", got, tc.limit)
			}
			// The policy's series would only say "stale" about a value that never changes.
			for _, name := range []string{"fakecloud_csi_capacity_last_good_age_seconds", "fakecloud_csi_capacity_mode"} {
				if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
					t.Errorf("%s: %d series (%v), want none", name, n, err)
				}
			}
		})
	}
}

func TestStaticFailsUntilTheFirstReading(t *testing.T) {
	src := newFakeSource(reading(8, 1, 0, 100, 1))
	src.set(nil, cloud.ErrUnavailable)
	s, err := NewStatic(src, "i-1", "test", time.Second, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.MaxVolumesPerNode(context.Background()); !errors.Is(err, cloud.ErrUnavailable) || got != 0 {
		t.Fatalf("MaxVolumesPerNode = %d, %v; want 0 and the cloud's Unavailable", got, err)
	}
	if got := testutil.ToFloat64(s.m.lookupErrors.WithLabelValues(string(ClassServer))); got != 1 {
		t.Errorf("lookup errors{class=server} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.m.reported); got != 0 {
		t.Errorf("reported before the first reading = %v, want 0 (docs/metrics.md)", got)
	}
	src.set(reading(8, 1, 0, 100, 2), nil)
	if got, err := s.MaxVolumesPerNode(context.Background()); err != nil || got != 7 {
		t.Fatalf("after recovery MaxVolumesPerNode = %d, %v; want 7", got, err)
	}
	if got := testutil.ToFloat64(s.m.lookups); got != 2 {
		t.Errorf("lookups = %v, want 2", got)
	}
}

func TestStaticRejectsAForeignReading(t *testing.T) {
	src := newFakeSource(reading(8, 1, 0, 100, 1))
	s, err := NewStatic(src, "i-2", "--dynamic-capacity=false", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	// fakeSource answers with the asked ID, so make the answer foreign by hand.
	s.src = sourceFunc(func(context.Context, string) (*cloud.Capacity, error) { return reading(8, 1, 0, 100, 1), nil })
	if _, err := s.MaxVolumesPerNode(context.Background()); err == nil {
		t.Fatal("a reading of another instance was accepted")
	}
	if got := testutil.ToFloat64(s.m.lookupErrors.WithLabelValues(string(ClassInvalid))); got != 1 {
		t.Errorf("lookup errors{class=invalid} = %v, want 1", got)
	}
}

func TestNewStaticValidates(t *testing.T) {
	if _, err := NewStatic(nil, "", "", 0, nil); err == nil || !strings.Contains(err.Error(), "source") ||
		!strings.Contains(err.Error(), "instance") || !strings.Contains(err.Error(), "lookup-timeout") {
		t.Errorf("NewStatic(nil, \"\", 0) = %v, want all three problems", err)
	}
}

type sourceFunc func(ctx context.Context, id string) (*cloud.Capacity, error)

func (f sourceFunc) GetCapacity(ctx context.Context, id string) (*cloud.Capacity, error) {
	return f(ctx, id)
}

func TestStaticRunFixesTheCountAtStart(t *testing.T) {
	src := newFakeSource(reading(8, 1, 0, 100, 1))
	src.set(nil, cloud.ErrUnavailable)
	s, err := NewStatic(src, "i-1", "test", time.Second, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	// The first lookup fails; Run retries after a second and then returns.
	for s.DebugState().(StaticDebugInfo).LastError == "" {
		time.Sleep(time.Millisecond)
	}
	src.set(reading(8, 1, 0, 100, 2), nil)
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if d := s.DebugState().(StaticDebugInfo); d.Reported != 7 || d.LastError != "" {
		t.Errorf("after Run DebugState = %+v, want 7 and no error", d)
	}
	if got := testutil.ToFloat64(s.m.reported); got != 7 {
		t.Errorf("reported gauge = %v, want 7", got)
	}
}

func TestStaticRunEndsWithItsContext(t *testing.T) {
	src := newFakeSource(reading(8, 1, 0, 100, 1))
	src.set(nil, cloud.ErrUnavailable)
	s, err := NewStatic(src, "i-1", "test", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if d := s.DebugState().(StaticDebugInfo); d.Reported != 0 {
		t.Errorf("Reported = %d without a successful lookup", d.Reported)
	}
}

// The first failure is logged at the default verbosity, the retries only at V(2), and the
// count once fixed.
func TestStaticLogsTheFirstFailureAndTheCount(t *testing.T) {
	src := newFakeSource(reading(8, 1, 0, 100, 1))
	src.set(nil, cloud.ErrUnavailable)
	s, err := NewStatic(src, "i-1", "test", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0), ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	for range 5 {
		if _, err := s.MaxVolumesPerNode(ctx); err == nil {
			t.Fatal("MaxVolumesPerNode while the cloud fails = nil error")
		}
	}
	src.set(reading(8, 1, 0, 100, 2), nil)
	for range 5 {
		if _, err := s.MaxVolumesPerNode(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		got = append(got, string(e.Type)+" "+e.Message)
	}
	want := []string{"ERROR Static capacity lookup failing, NodeGetInfo fails until it succeeds", "INFO Static capacity fixed"}
	if !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}
