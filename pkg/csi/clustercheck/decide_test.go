package clustercheck

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
)

const modeLabel = "fakecloud.dev/dynamic-capacity"

// labelled is cluster (kubelet v1.37.2 on node-1) with node-1 labelled modeLabel=v; "" leaves
// the label out.
func labelled(t testing.TB, server string, period *int64, v string) *kubeapitest.Server {
	t.Helper()
	cs := cluster(t, server, period, false, "v1.37.2")
	if v != "" {
		setNodeLabel(t, cs, v)
	}
	return cs
}

// setNodeLabel sets node-1's modeLabel to v.
func setNodeLabel(t testing.TB, cs *kubeapitest.Server, v string) {
	t.Helper()
	n := &corev1.Node{}
	if !cs.Get("", "node-1", n) {
		t.Fatal("no node-1")
	}
	n.Labels = map[string]string{modeLabel: v}
	if err := cs.Put(n); err != nil {
		t.Fatal(err)
	}
}

// supportedGauge is the value of fakecloud_csi_cluster_dynamic_capacity_supported in reg, -1
// when it is not exported.
func supportedGauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fakecloud_csi_cluster_dynamic_capacity_supported" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestDecide is the mode decision of a node plugin at start: the reason of a static count
// ("" for the policy), whether the cluster is watched, the gauge and the Events.
func TestDecide(t *testing.T) {
	unreachable := labelled(t, "v1.37.2", ptr.To[int64](10), "")
	unreachable.PrependReactor("*", "*", func(kubeapitest.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	for _, tc := range []struct {
		name          string
		kube          *kubeapitest.Server // nil: no API access
		dynamic       bool
		nodeName      string
		timeout       time.Duration
		wantReason    string
		wantWatch     bool
		wantSupported float64 // -1: not exported
		wantEvents    int
		wantNoCalls   bool
	}{
		{name: "no API access: the flag", dynamic: true, wantSupported: -1},
		{name: "no API access, static flag", dynamic: false, wantReason: "--dynamic-capacity=false", wantSupported: -1},
		{name: "supported cluster", kube: labelled(t, "v1.37.2", ptr.To[int64](10), ""), dynamic: true, wantWatch: true, wantSupported: 1},
		{name: "period unset: static, an Event, still watched", kube: labelled(t, "v1.37.2", nil, ""), dynamic: true,
			wantReason: "the cluster cannot take CSINode allocatable updates: CSIDriver disk.fakecloud.dev does not set spec.nodeAllocatableUpdatePeriodSeconds " +
				"(or the API server's MutableCSINodeAllocatableCount gate is off and dropped it)",
			wantWatch: true, wantSupported: 0, wantEvents: 1},
		{name: "no answer: the flag as given", kube: unreachable, dynamic: true, timeout: 50 * time.Millisecond, wantSupported: -1},
		{name: "static flag without a node name: no check", kube: labelled(t, "v1.37.2", ptr.To[int64](10), ""), dynamic: false,
			wantReason: "--dynamic-capacity=false", wantSupported: -1, wantNoCalls: true},
		{name: "label true overrides the flag", kube: labelled(t, "v1.37.2", ptr.To[int64](10), "true"), nodeName: "node-1",
			wantWatch: true, wantSupported: 1},
		{name: "label false overrides the flag", kube: labelled(t, "v1.37.2", ptr.To[int64](10), "false"), dynamic: true, nodeName: "node-1",
			wantReason: "node label " + modeLabel + "=false", wantSupported: -1},
		{name: "a bad label value is ignored", kube: labelled(t, "v1.37.2", ptr.To[int64](10), "yes"), dynamic: true, nodeName: "node-1",
			wantWatch: true, wantSupported: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			cfg := Config{DriverName: driver, NodeID: "i-1", NodeName: tc.nodeName, ModeLabel: modeLabel,
				DynamicCapacity: tc.dynamic, Timeout: time.Minute}
			if tc.timeout > 0 {
				cfg.Timeout = tc.timeout
			}
			mode := Decide(context.Background(), cfg, client(t, tc.kube), reg)
			if mode.StaticReason != tc.wantReason || (mode.Watch != nil) != tc.wantWatch {
				t.Errorf("Decide = reason %q, watch %v; want %q, watch %v", mode.StaticReason, mode.Watch != nil, tc.wantReason, tc.wantWatch)
			}
			if got := supportedGauge(t, reg); got != tc.wantSupported {
				t.Errorf("supported gauge = %v, want %v", got, tc.wantSupported)
			}
			if tc.kube == nil {
				return
			}
			if tc.wantNoCalls && len(tc.kube.Actions()) != 0 {
				t.Errorf("the cluster was read: %v", tc.kube.Actions())
			}
			if evs := events(tc.kube); len(evs) != tc.wantEvents {
				t.Errorf("%d events, want %d", len(evs), tc.wantEvents)
			}
		})
	}
}

// TestWatchFollowsTheCluster: the re-check moves the gauge and DebugState with the cluster;
// a failed re-check changes nothing.
func TestWatchFollowsTheCluster(t *testing.T) {
	kube := labelled(t, "v1.37.2", ptr.To[int64](10), "")
	reg := prometheus.NewRegistry()
	mode := Decide(context.Background(), Config{DriverName: driver, NodeID: "i-1", ModeLabel: modeLabel, DynamicCapacity: true, Timeout: time.Minute}, client(t, kube), reg)
	watch := mode.Watch
	if mode.StaticReason != "" || watch == nil {
		t.Fatalf("Decide = %q, %v; want dynamic with a watch", mode.StaticReason, watch)
	}
	setPeriod := func(p *int64) {
		t.Helper()
		d := &storagev1.CSIDriver{}
		if !kube.Get("", driver, d) {
			t.Fatal("no CSIDriver")
		}
		d.Spec.NodeAllocatableUpdatePeriodSeconds = p
		if err := kube.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		period *int64
		fail   bool
		want   float64
	}{
		{period: nil, want: 0},                           // someone removed the period: the count is frozen now
		{period: ptr.To[int64](30), fail: true, want: 0}, // a failed re-check changes nothing
		{period: ptr.To[int64](30), want: 1},             // back
	} {
		setPeriod(step.period)
		remove := func() {}
		if step.fail {
			remove = kube.PrependReactor("get", "csidrivers", func(kubeapitest.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("down")
			})
		}
		watch.once(context.Background())
		remove()
		if got := testutil.ToFloat64(watch.gauge); got != step.want {
			t.Errorf("period %v, failing %v: supported = %v, want %v", step.period, step.fail, got, step.want)
		}
		// DebugState (/debug/cluster) shows the newest answer; a failed check leaves the one before.
		b, err := json.Marshal(watch.DebugState())
		if err != nil {
			t.Fatal(err)
		}
		var got DebugInfo
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		wantPeriod := step.period
		if step.fail {
			wantPeriod = nil
		}
		if got.Supported != (step.want == 1) || !got.SupportedAtStart || got.CheckedAt.IsZero() ||
			!reflect.DeepEqual(got.NodeAllocatableUpdatePeriodSeconds, wantPeriod) || got.ServerVersion != "v1.37.2" {
			t.Errorf("period %v, failing %v: DebugState = %+v", step.period, step.fail, got)
		}
		if !got.Supported && len(got.Problems) == 0 {
			t.Errorf("period %v: unsupported without problems", step.period)
		}
	}
}
