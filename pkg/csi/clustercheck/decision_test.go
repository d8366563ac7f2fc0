package clustercheck

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
)

// cell is cluster with node-1's kubelet at kubelet and its mode label at label ("": none).
func cell(t testing.TB, server string, period *int64, kubelet, label string) *kubeapitest.Server {
	t.Helper()
	cs := cluster(t, server, period, false, kubelet)
	if label != "" {
		setNodeLabel(t, cs, label)
	}
	return cs
}

// TestDecisionPerCell is the rule of docs/compatibility.md, one row per cell of the
// compatibility matrix: what the node plugin decides from what it can see, and why.
func TestDecisionPerCell(t *testing.T) {
	p10, p600 := ptr.To[int64](10), ptr.To[int64](600)
	for _, tc := range []struct {
		name       string
		kube       *kubeapitest.Server // nil: no API access
		dynamic    bool                // --dynamic-capacity
		want       CapacityDecision
		wantReason Reason
		wantGate   GateState // the kubelet's; "" when not read
	}{
		{name: "1.37 control plane, 1.37 kubelet, period 10 s", kube: cell(t, "v1.37.2", p10, "v1.37.2", ""), dynamic: true,
			want: Dynamic, wantReason: ReasonSupported, wantGate: GateLockedOn},
		{name: "1.37 control plane, 1.36 kubelet, period 600 s", kube: cell(t, "v1.37.2", p600, "v1.36.3", ""), dynamic: true,
			want: Dynamic, wantReason: ReasonSupported, wantGate: GateLockedOn},
		{name: "1.37 control plane, 1.35 kubelet (gate on by default)", kube: cell(t, "v1.37.2", p10, "v1.35.4", ""), dynamic: true,
			want: Dynamic, wantReason: ReasonSupported, wantGate: GateOnByDefault},
		{name: "1.37 control plane, 1.34 kubelet, gate off (default)", kube: cell(t, "v1.37.2", p10, "v1.34.4", ""), dynamic: true,
			want: Static, wantReason: ReasonKubeletGateOffByDefault, wantGate: GateOffByDefault},
		{name: "1.37 control plane, 1.34 kubelet, gate on by hand and the node labelled true", kube: cell(t, "v1.37.2", p10, "v1.34.4", "true"), dynamic: true,
			want: Dynamic, wantReason: ReasonNodeLabelOverride, wantGate: GateOffByDefault},
		{name: "1.36 control plane, 1.33 kubelet labelled true (alpha gate on by hand)", kube: cell(t, "v1.36.3", p10, "v1.33.5", "true"), dynamic: true,
			want: Dynamic, wantReason: ReasonNodeLabelOverride, wantGate: GateOffByDefault},
		{name: "1.36 control plane, 1.32 kubelet labelled true: no gate to turn on", kube: cell(t, "v1.36.3", p10, "v1.32.9", "true"), dynamic: true,
			want: Static, wantReason: ReasonKubeletTooOld, wantGate: GateAbsent},
		{name: "1.37 control plane, period unset", kube: cell(t, "v1.37.2", nil, "v1.37.2", ""), dynamic: true,
			want: Static, wantReason: ReasonPeriodUnset, wantGate: GateLockedOn},
		{name: "1.37 control plane, period unset, label true: not overridden", kube: cell(t, "v1.37.2", nil, "v1.37.2", "true"), dynamic: true,
			want: Static, wantReason: ReasonPeriodUnset, wantGate: GateLockedOn},
		{name: "1.34 control plane, gate off (period dropped), 1.34 kubelet labelled true", kube: cell(t, "v1.34.4", nil, "v1.34.4", "true"), dynamic: true,
			want: Static, wantReason: ReasonPeriodUnset, wantGate: GateOffByDefault},
		{name: "1.34 control plane, period read back, unlabelled", kube: cell(t, "v1.34.4", p10, "v1.34.4", ""), dynamic: true,
			want: Static, wantReason: ReasonAPIServerGateOffByDefault, wantGate: GateOffByDefault},
		{name: "1.34 control plane, gates on by hand, labelled true", kube: cell(t, "v1.34.4", p10, "v1.34.4", "true"), dynamic: true,
			want: Dynamic, wantReason: ReasonNodeLabelOverride, wantGate: GateOffByDefault},
		{name: "1.32 control plane labelled true", kube: cell(t, "v1.32.0", p10, "v1.32.0", "true"), dynamic: true,
			want: Static, wantReason: ReasonAPIServerTooOld, wantGate: GateAbsent},
		{name: "no CSIDriver", kube: func() *kubeapitest.Server {
			cs := cluster(t, "v1.37.2", nil, true, "v1.37.2")
			return cs
		}(), dynamic: true, want: Static, wantReason: ReasonCSIDriverMissing, wantGate: GateLockedOn},
		{name: "--dynamic-capacity=false, unlabelled", kube: cell(t, "v1.37.2", p10, "v1.37.2", ""), dynamic: false,
			want: Static, wantReason: ReasonFlagOff, wantGate: GateLockedOn},
		{name: "node label false", kube: cell(t, "v1.37.2", p10, "v1.37.2", "false"), dynamic: true,
			want: Static, wantReason: ReasonNodeLabelOff, wantGate: GateLockedOn},
		{name: "no API access: the flag", dynamic: true, want: Dynamic, wantReason: ReasonUnchecked},
		{name: "no API access, --dynamic-capacity=false", dynamic: false, want: Static, wantReason: ReasonFlagOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			cfg := Config{DriverName: driver, NodeID: "i-1", NodeName: "node-1", ModeLabel: modeLabel, DynamicCapacity: tc.dynamic, Timeout: time.Minute}
			mode := Decide(context.Background(), cfg, client(t, tc.kube), reg)
			d := mode.Decision
			if d.Decision != tc.want || d.Reason != tc.wantReason || d.Evidence.KubeletGate != tc.wantGate {
				t.Fatalf("decision %s (%s), kubelet gate %q; want %s (%s), %q; evidence %+v", d.Decision, d.Reason, d.Evidence.KubeletGate,
					tc.want, tc.wantReason, tc.wantGate, d.Evidence)
			}
			// The reporter Decide chose agrees with the decision.
			if static := mode.StaticReason != ""; static != (tc.want == Static) {
				t.Errorf("StaticReason %q but decision %s", mode.StaticReason, d.Decision)
			}
			if got := testutil.ToFloat64(mustGaugeVec(t, reg).WithLabelValues(string(tc.want), string(tc.wantReason))); got != 1 {
				t.Errorf("fakecloud_csi_cluster_capacity_decision{%s,%s} = %v, want 1", tc.want, tc.wantReason, got)
			}
			if n := testutil.CollectAndCount(mustGaugeVec(t, reg)); n != 2*len(AllReasons()) {
				t.Errorf("%d decision series, want the fixed %d", n, 2*len(AllReasons()))
			}
			if tc.wantReason == ReasonNodeLabelOverride && (len(d.Evidence.Overridden) == 0 || len(d.Evidence.Problems) != 0) {
				t.Errorf("an override must list what it overrode and no problem: %+v", d.Evidence)
			}
		})
	}
}

// mustGaugeVec finds fakecloud_csi_cluster_capacity_decision in reg by gathering it again
// into a fresh vector of the same values (the registry holds only collectors).
func mustGaugeVec(t *testing.T, reg *prometheus.Registry) *prometheus.GaugeVec {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capacity_decision"}, []string{"decision", "reason"})
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "fakecloud_csi_cluster_capacity_decision" {
			continue
		}
		found = true
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			g.WithLabelValues(l["decision"], l["reason"]).Set(m.GetGauge().GetValue())
		}
	}
	if !found {
		t.Fatal("fakecloud_csi_cluster_capacity_decision is not exported")
	}
	return g
}

// TestKubeletMinorGauge: the kubelet's minor is a gauge value, not a label.
func TestKubeletMinorGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	Decide(context.Background(), Config{DriverName: driver, NodeID: "i-1", NodeName: "node-1", ModeLabel: modeLabel, DynamicCapacity: true, Timeout: time.Minute},
		client(t, cell(t, "v1.37.2", ptr.To[int64](10), "v1.34.4", "")), reg)
	if got := gaugeNamed(t, reg, "fakecloud_csi_cluster_kubelet_minor_version"); got != 34 {
		t.Errorf("kubelet minor gauge = %v, want 34", got)
	}
}

// gaugeNamed is the value of the unlabelled gauge name in reg.
func gaugeNamed(t *testing.T, reg *prometheus.Registry, name string) float64 {
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
	t.Fatalf("%s is not exported", name)
	return 0
}

// TestAttacherEvidence: an errorCode on one of this driver's VolumeAttachments is seen; another
// driver's is not; a list the RBAC refuses leaves it unknown and the check still answers.
func TestAttacherEvidence(t *testing.T) {
	va := func(name, attacher string, code *int32) *storagev1.VolumeAttachment {
		v := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{Attacher: attacher, NodeName: "node-1"}}
		if code != nil {
			v.Status.AttachError = &storagev1.VolumeError{Message: "no slot", ErrorCode: code}
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		vas    []*storagev1.VolumeAttachment
		forbid bool
		want   AttacherEvidence
	}{
		{name: "ours with code 8", vas: []*storagev1.VolumeAttachment{va("a", driver, nil), va("b", driver, ptr.To[int32](8))}, want: AttacherWritesErrorCode},
		{name: "ours failed without a code", vas: []*storagev1.VolumeAttachment{{
			ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: storagev1.VolumeAttachmentSpec{Attacher: driver},
			Status: storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "no slot"}},
		}}, want: AttacherNoErrorCodeSeen},
		{name: "another driver's code", vas: []*storagev1.VolumeAttachment{va("d", "other.csi", ptr.To[int32](8))}, want: AttacherNoErrorCodeSeen},
		{name: "list forbidden", forbid: true, want: AttacherUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := cluster(t, "v1.37.2", ptr.To[int64](10), false, "v1.37.2")
			for _, v := range tc.vas {
				if err := cs.Put(v); err != nil {
					t.Fatal(err)
				}
			}
			if tc.forbid {
				cs.PrependReactor("list", "volumeattachments", func(kubeapitest.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}, "", nil)
				})
			}
			res, err := Checker{Client: client(t, cs), DriverName: driver, NodeName: "node-1"}.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.AttacherErrorCode != tc.want || !res.Supported {
				t.Errorf("attacher evidence %q, supported %v; want %q, true", res.AttacherErrorCode, res.Supported, tc.want)
			}
		})
	}
}
