package csi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi"
	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

var _ Cloud = (*realCloud)(nil)

// newNodeDriver is clustercheck.Decide and NewForCloud in node mode for instance i-1 (8 slots, 1 out of band) of a
// fake cloud, with the driver's flags plus args.
func newNodeDriver(t *testing.T, kube *kubeapitest.Server, args ...string) (*Driver, *realCloud, *prometheus.Registry) {
	t.Helper()
	var o Options
	fs := pflag.NewFlagSet("driver", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(append([]string{"--mode=node", "--node-id=i-1", "--state-dir=" + t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 8, 1)
	reg := prometheus.NewRegistry()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := NewForCloud(o, f, clustercheck.Decide(context.Background(), o.ClusterCheckConfig(), kubeClient(t, kube), reg), mount.NewFake(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return d, f, reg
}

func TestDynamicCapacityFlagChoosesTheReporter(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantStatic  bool
		wantDynamic float64
	}{
		{name: "default is the policy", args: nil, wantDynamic: 1},
		{name: "static count", args: []string{"--dynamic-capacity=false"}, wantStatic: true, wantDynamic: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, f, reg := newNodeDriver(t, nil, tc.args...)
			_, static := d.deps.Capacity.(*capacity.Static)
			if static != tc.wantStatic {
				t.Fatalf("capacity reporter %T, want static: %v", d.deps.Capacity, tc.wantStatic)
			}
			got, err := d.deps.Capacity.MaxVolumesPerNode(context.Background())
			if err != nil || got != 7 {
				t.Errorf("MaxVolumesPerNode = %d, %v; want 7 (8 slots - 1 out of band)", got, err)
			}
			// The static count ignores later changes of the limit.
			f.SetInstanceLimits("i-1", 4, 1)
			if static {
				if got, _ := d.deps.Capacity.MaxVolumesPerNode(context.Background()); got != 7 {
					t.Errorf("static count after a limit change = %d, want 7", got)
				}
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var dyn float64 = -1
			for _, mf := range mfs {
				if mf.GetName() == "fakecloud_csi_capacity_dynamic" {
					dyn = mf.GetMetric()[0].GetGauge().GetValue()
				}
			}
			if dyn != tc.wantDynamic {
				t.Errorf("fakecloud_csi_capacity_dynamic = %v, want %v", dyn, tc.wantDynamic)
			}
		})
	}
}

// kubeCluster is a fake API server of version server whose CSIDriver sets period (nil: unset),
// with a Node "node-1" (kubelet v1.37.2) labelled nodeLabels.
func kubeCluster(t testing.TB, server string, period *int64, nodeLabels map[string]string) *kubeapitest.Server {
	t.Helper()
	cs := kubeapitest.New(t, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: DriverName},
		Spec:       storagev1.CSIDriverSpec{NodeAllocatableUpdatePeriodSeconds: period},
	}, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: nodeLabels},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}},
	})
	cs.SetServerVersion(server)
	return cs
}

// kubeClient is the cluster check's client of the fake API server s, nil for nil (no API
// access).
func kubeClient(t testing.TB, s *kubeapitest.Server) *kubeapi.Client {
	t.Helper()
	if s == nil {
		return nil
	}
	c, err := clustercheck.NewClientForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClusterCheckChoosesTheReporter(t *testing.T) {
	unreachable := kubeCluster(t, "v1.37.2", ptr.To[int64](10), nil)
	unreachable.PrependReactor("*", "*", func(kubeapitest.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	tests := []struct {
		name          string
		kube          *kubeapitest.Server
		args          []string
		wantStatic    bool
		wantSupported float64 // -1: the gauge is not exported
		wantEvents    int
		wantReason    string // in /debug/capacity, for a static count
	}{
		{name: "supported cluster: the policy", kube: kubeCluster(t, "v1.37.2", ptr.To[int64](10), nil), wantSupported: 1},
		{name: "period unset: static count and an event", kube: kubeCluster(t, "v1.37.2", nil, nil), wantStatic: true, wantEvents: 1,
			wantReason: "cannot take CSINode allocatable updates: CSIDriver disk.fakecloud.dev does not set spec.nodeAllocatableUpdatePeriodSeconds"},
		{name: "old API server: static count and an event", kube: kubeCluster(t, "v1.34.1", ptr.To[int64](10), nil), wantStatic: true, wantEvents: 1,
			wantReason: "API server is v1.34.1"},
		{name: "no answer: the flag as given, no gauge", kube: unreachable, args: []string{"--cluster-check-timeout=50ms"}, wantSupported: -1},
		{name: "--dynamic-capacity=false: no check", kube: kubeCluster(t, "v1.37.2", ptr.To[int64](10), nil),
			args: []string{"--dynamic-capacity=false"}, wantStatic: true, wantSupported: -1, wantReason: "--dynamic-capacity=false"},
		{name: "node label true overrides --dynamic-capacity=false", kube: kubeCluster(t, "v1.37.2", ptr.To[int64](10), label("true")),
			args: []string{"--dynamic-capacity=false", "--node-name=node-1"}, wantSupported: 1},
		{name: "node label false overrides the default", kube: kubeCluster(t, "v1.37.2", ptr.To[int64](10), label("false")),
			args: []string{"--node-name=node-1"}, wantStatic: true, wantSupported: -1, wantReason: "node label fakecloud.dev/dynamic-capacity=false"},
		{name: "node label false: no fallback event on an old cluster", kube: kubeCluster(t, "v1.34.1", nil, label("false")),
			args: []string{"--node-name=node-1"}, wantStatic: true, wantSupported: -1, wantReason: "node label"},
		{name: "node label true still needs a supported cluster", kube: kubeCluster(t, "v1.37.2", nil, label("true")),
			args: []string{"--dynamic-capacity=false", "--node-name=node-1"}, wantStatic: true, wantEvents: 1, wantReason: "nodeAllocatableUpdatePeriodSeconds"},
		{name: "a bad label value is ignored", kube: kubeCluster(t, "v1.37.2", ptr.To[int64](10), label("yes")),
			args: []string{"--node-name=node-1"}, wantSupported: 1},
		{name: "unlabelled node: the flag", kube: kubeCluster(t, "v1.37.2", ptr.To[int64](10), nil),
			args: []string{"--dynamic-capacity=false", "--node-name=node-1"}, wantStatic: true, wantSupported: -1, wantReason: "--dynamic-capacity=false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, reg := newNodeDriver(t, tc.kube, tc.args...)
			st, static := d.deps.Capacity.(*capacity.Static)
			if static != tc.wantStatic {
				t.Errorf("capacity reporter %T, want static: %v", d.deps.Capacity, tc.wantStatic)
			}
			if static {
				if r := st.DebugState().(capacity.StaticDebugInfo).Reason; !strings.Contains(r, tc.wantReason) {
					t.Errorf("static reason %q, want it to contain %q", r, tc.wantReason)
				}
			}
			if got := gaugeValue(t, reg, "fakecloud_csi_cluster_dynamic_capacity_supported"); got != tc.wantSupported {
				t.Errorf("fakecloud_csi_cluster_dynamic_capacity_supported = %v, want %v", got, tc.wantSupported)
			}
			if evs := tc.kube.List(eventsv1.SchemeGroupVersion, "events"); len(evs) != tc.wantEvents {
				t.Errorf("%d events, want %d", len(evs), tc.wantEvents)
			}
			if tc.name == "--dynamic-capacity=false: no check" && len(tc.kube.Actions()) != 0 {
				t.Errorf("the check ran with --dynamic-capacity=false: %v", tc.kube.Actions())
			}
		})
	}
}

// label is a Node's labels with DynamicCapacityNodeLabel set to v.
func label(v string) map[string]string { return map[string]string{DynamicCapacityNodeLabel: v} }

// gaugeValue is the value of the unlabelled gauge name in reg, -1 when it is not exported.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// /debug/cluster serves the watch of the cluster check that NewForCloud was given.
func TestDebugClusterShowsTheWatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kube     *kubeapitest.Server
		wantCode int
	}{
		{"watched", kubeCluster(t, "v1.37.2", ptr.To[int64](10), nil), http.StatusOK},
		{"not checked", nil, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := newNodeDriver(t, tc.kube)
			srv := httptest.NewServer(d.HTTPHandler())
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/debug/cluster")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("GET /debug/cluster = %d, want %d", resp.StatusCode, tc.wantCode)
			}
			if tc.wantCode != http.StatusOK {
				return
			}
			var got clustercheck.DebugInfo
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if !got.Supported || !got.SupportedAtStart || got.ServerVersion != "v1.37.2" || got.CheckedAt.IsZero() {
				t.Errorf("/debug/cluster = %+v", got)
			}
		})
	}
}

// /debug/capacity shows the capacity decision at start, with its reason and evidence, beside
// the reporter's own fields (which stay where the console and tools read them).
func TestDebugCapacityShowsTheDecision(t *testing.T) {
	for _, tc := range []struct {
		name         string
		kube         *kubeapitest.Server
		args         []string
		wantDecision string
		wantReason   string
		wantMode     string
	}{
		{name: "supported cluster", kube: kubeCluster(t, "v1.37.2", ptr.To[int64](10), nil), args: []string{"--node-name=node-1"},
			wantDecision: "dynamic", wantReason: "supported"},
		{name: "period unset", kube: kubeCluster(t, "v1.37.2", nil, nil), args: []string{"--node-name=node-1"},
			wantDecision: "static", wantReason: "period-unset", wantMode: "static"},
		{name: "no API access", wantDecision: "dynamic", wantReason: "unchecked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := newNodeDriver(t, tc.kube, tc.args...)
			srv := httptest.NewServer(d.HTTPHandler())
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/debug/capacity")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				NodeID   string `json:"nodeId"`
				Mode     string `json:"mode"`
				Decision struct {
					Decision string                `json:"decision"`
					Reason   string                `json:"reason"`
					Evidence clustercheck.Evidence `json:"evidence"`
				} `json:"decision"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got.NodeID != "i-1" || got.Decision.Decision != tc.wantDecision || got.Decision.Reason != tc.wantReason {
				t.Errorf("/debug/capacity = %+v; want node i-1, decision %s (%s)", got, tc.wantDecision, tc.wantReason)
			}
			if tc.wantMode != "" && got.Mode != tc.wantMode {
				t.Errorf("mode %q, want %q", got.Mode, tc.wantMode)
			}
			if tc.kube != nil && (got.Decision.Evidence.KubeletVersion != "v1.37.2" || got.Decision.Evidence.ServerVersion != "v1.37.2" || !got.Decision.Evidence.Checked) {
				t.Errorf("evidence %+v: want what the check read", got.Decision.Evidence)
			}
		})
	}
}
