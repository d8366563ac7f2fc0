package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

func ptr[T any](v T) *T { return &v }

// checkNode is a Node of the driver in zone (unschedulable or tainted when asked).
func checkNode(name, zone, kubelet string, labelled bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[localcluster.ZoneLabel] = zone
	}
	if labelled {
		n.Labels[ModeLabel] = "true"
	}
	n.Status.NodeInfo.KubeletVersion = kubelet
	return n
}

// csiNode lists the driver with count (nil: the driver not listed).
func csiNode(name string, count *int32) *storagev1.CSINode {
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if count != nil {
		cn.Spec.Drivers = []storagev1.CSINodeDriver{{Name: localcluster.DriverName, NodeID: name,
			Allocatable: &storagev1.VolumeNodeResources{Count: count}}}
	}
	return cn
}

func TestPickNodes(t *testing.T) {
	tainted := checkNode("b", "zone-a", "v1.37.2", false)
	tainted.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	cordoned := checkNode("b", "zone-a", "v1.37.2", false)
	cordoned.Spec.Unschedulable = true
	for _, tc := range []struct {
		name                string
		objs                []runtime.Object
		want                string
		wantTarget, wantErr string
		wantSpare           string
	}{
		{name: "first fitting node and its zone's spare",
			objs: []runtime.Object{checkNode("a", "zone-a", "v1.37.2", false), checkNode("b", "zone-b", "v1.37.2", false), checkNode("c", "zone-a", "v1.37.2", false),
				csiNode("a", ptr[int32](3)), csiNode("b", ptr[int32](15)), csiNode("c", ptr[int32](7))},
			wantTarget: "a", wantSpare: "c"},
		{name: "a node alone in its zone is skipped",
			objs: []runtime.Object{checkNode("a", "zone-b", "v1.37.2", false), checkNode("b", "zone-a", "v1.37.2", false), checkNode("c", "zone-a", "v1.37.2", false),
				csiNode("a", ptr[int32](3)), csiNode("b", ptr[int32](3)), csiNode("c", ptr[int32](7))},
			wantTarget: "b", wantSpare: "c"},
		{name: "asked node", want: "c",
			objs: []runtime.Object{checkNode("a", "zone-a", "v1.37.2", false), checkNode("c", "zone-a", "v1.37.2", false),
				csiNode("a", ptr[int32](3)), csiNode("c", ptr[int32](7))},
			wantTarget: "c", wantSpare: "a"},
		{name: "asked node missing", want: "x", objs: []runtime.Object{checkNode("a", "zone-a", "v1.37.2", false)}, wantErr: "no such node"},
		{name: "asked node without the driver", want: "a",
			objs:    []runtime.Object{checkNode("a", "zone-a", "v1.37.2", false), checkNode("c", "zone-a", "v1.37.2", false), csiNode("a", nil), csiNode("c", ptr[int32](7))},
			wantErr: "does not list " + localcluster.DriverName},
		{name: "asked node with count 1", want: "a",
			objs:    []runtime.Object{checkNode("a", "zone-a", "v1.37.2", false), checkNode("c", "zone-a", "v1.37.2", false), csiNode("a", ptr[int32](1)), csiNode("c", ptr[int32](7))},
			wantErr: "count 1"},
		{name: "the only other node of the zone is tainted", want: "a",
			objs:    []runtime.Object{checkNode("a", "zone-a", "v1.37.2", false), tainted, csiNode("a", ptr[int32](3)), csiNode("b", ptr[int32](7))},
			wantErr: "no other node of zone zone-a"},
		{name: "nothing fits: every reason said",
			objs:    []runtime.Object{checkNode("a", "", "v1.37.2", false), cordoned, csiNode("b", ptr[int32](7))},
			wantErr: "a: no " + localcluster.ZoneLabel + " label (the driver has not registered there); b: unschedulable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objs...)
			target, spare, err := pickNodes(context.Background(), cs, tc.want)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("pickNodes = %s, %s, %v; want an error with %q", target, spare, err, tc.wantErr)
				}
				return
			}
			if err != nil || target != tc.wantTarget || spare != tc.wantSpare {
				t.Fatalf("pickNodes = %s, %s, %v; want %s, %s", target, spare, err, tc.wantTarget, tc.wantSpare)
			}
		})
	}
}

func TestCellFor(t *testing.T) {
	cells, err := ReadCells("cells.json")
	if err != nil {
		t.Fatal(err)
	}
	obs := func(kubelet string, labelled bool, period *int64) Observed {
		return Observed{ServerVersion: "v1.37.2", Attacher: "v4.13.0", PeriodSeconds: period,
			Kubelets: map[string]ObservedKubelet{"n": {Version: kubelet, Labelled: labelled}, "other": {Version: "v1.37.2"}}}
	}
	for _, tc := range []struct {
		name        string
		o           Observed
		gates       map[string]bool
		wantCell    string
		wantMatched bool
		wantGates   string
		wantLabels  string
	}{
		{name: "kind's own kubelet", o: obs("v1.37.2", false, ptr[int64](10)), gates: map[string]bool{},
			wantCell: "cp1.37-kubelet1.37-attacher4.13", wantMatched: true},
		{name: "1.34 at its default", o: obs("v1.34.4", false, ptr[int64](10)), gates: map[string]bool{},
			wantCell: "cp1.37-kubelet1.34-gate-off-attacher4.13", wantMatched: true},
		{name: "1.34 gate on by hand and labelled", o: obs("v1.34.4", true, ptr[int64](10)), gates: map[string]bool{GateName: true},
			wantCell: "cp1.37-kubelet1.34-gate-on-labelled-attacher4.13", wantMatched: true, wantGates: GateName + "=true", wantLabels: ModeLabel + "=true"},
		{name: "1.34 gates not read, labelled", o: obs("v1.34.4", true, ptr[int64](10)), gates: nil,
			wantCell: "cp1.37-kubelet1.34-gate-on-labelled-attacher4.13", wantMatched: true, wantGates: GateName + "=true", wantLabels: ModeLabel + "=true"},
		{name: "1.34 gate on by hand, unlabelled: no cell", o: obs("v1.34.4", false, ptr[int64](10)), gates: map[string]bool{GateName: true},
			wantCell: "cp1.37-kubelet1.34-attacher4.13-not-in-the-matrix", wantGates: GateName + "=true"},
		{name: "1.37 with the gate written out as on", o: obs("v1.37.2", false, ptr[int64](10)), gates: map[string]bool{GateName: true},
			wantCell: "cp1.37-kubelet1.37-attacher4.13", wantMatched: true, wantGates: GateName + "=true"},
		{name: "period unset", o: obs("v1.37.2", false, nil), gates: map[string]bool{},
			wantCell: "cp1.37-kubelet1.37-attacher4.13-period-unset", wantMatched: true},
		{name: "a 1.33 kubelet", o: obs("v1.33.1", false, ptr[int64](10)), gates: map[string]bool{},
			wantCell: "cp1.37-kubelet1.33-attacher4.13-not-in-the-matrix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, matched := cellFor(tc.o, "n", tc.gates, cells)
			if c.Name != tc.wantCell || matched != tc.wantMatched {
				t.Fatalf("cellFor = %s, %v; want %s, %v", c.Name, matched, tc.wantCell, tc.wantMatched)
			}
			// The row's cell says what was observed.
			if c.Kubelet != tc.o.Kubelets["n"].Version || c.ControlPlane != "v1.37.2" || c.Attacher != "v4.13.0" {
				t.Errorf("cell versions %s %s %s, want the observed", c.ControlPlane, c.Kubelet, c.Attacher)
			}
			if c.KubeletGates != tc.wantGates || c.NodeLabels != tc.wantLabels {
				t.Errorf("cell gates %q labels %q, want %q %q", c.KubeletGates, c.NodeLabels, tc.wantGates, tc.wantLabels)
			}
			if !matched && c.Expect.Decision != "" {
				t.Errorf("an unmatched cell has an expectation: %+v", c.Expect)
			}
		})
	}
}

func TestParseConfigz(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]bool
		wantErr  bool
	}{
		{name: "gates", in: `{"kubeletconfig":{"featureGates":{"MutableCSINodeAllocatableCount":true}}}`, want: map[string]bool{GateName: true}},
		{name: "no gates", in: `{"kubeletconfig":{"cgroupDriver":"systemd"}}`, want: map[string]bool{}},
		{name: "not configz", in: `{"kind":"Status"}`, wantErr: true},
		{name: "not JSON", in: `<html>`, wantErr: true},
		{name: "too big", in: `{"kubeletconfig":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`, wantErr: true},
	} {
		got, err := parseConfigz([]byte(tc.in))
		if (err != nil) != tc.wantErr || len(got) != len(tc.want) || got[GateName] != tc.want[GateName] {
			t.Errorf("%s: parseConfigz = %v, %v; want %v (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// fakeCloud serves GET and PATCH /v1/instances/{id} (out-of-band slots) of one instance;
// afterPatch, when set, runs after each PATCH was applied.
type fakeCloud struct {
	mu         sync.Mutex
	in         cloud.Instance
	afterPatch func()
}

func (f *fakeCloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path != "/v1/instances/"+f.in.ID {
		http.Error(w, `{"code":"InstanceNotFound","message":"no"}`, http.StatusNotFound)
		return
	}
	if r.Method == http.MethodPatch {
		var p cloud.InstancePatch
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.OutOfBandSlots == nil {
			http.Error(w, `{"code":"InvalidArgument","message":"bad patch"}`, http.StatusBadRequest)
			return
		}
		f.in.OutOfBandSlots = *p.OutOfBandSlots
		if f.afterPatch != nil {
			defer f.afterPatch()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(f.in)
}

func (f *fakeCloud) oob() int { f.mu.Lock(); defer f.mu.Unlock(); return f.in.OutOfBandSlots }

func startFakeCloud(t *testing.T, f *fakeCloud) *admin.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cc, err := admin.NewClient(srv.URL, cloud.WithToken("admin"))
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// proxyBody answers a pod proxy GET with a fixed body.
type proxyBody string

func (p proxyBody) DoRaw(context.Context) ([]byte, error) { return []byte(p), nil }
func (p proxyBody) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(p))), nil
}

func pluginPod(name, node string, uid types.UID, created time.Time) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fakecloud-csi", UID: uid,
		Labels: map[string]string{"app.kubernetes.io/name": "fakecloud-csi-node"}, CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "driver",
			Ports: []corev1.ContainerPort{{Name: "healthz", ContainerPort: 9808}, {Name: "http", ContainerPort: 19809}}}}}}
}

// The debug endpoint is read through the pod proxy of the node's newest plugin pod, on its
// "http" port; a restart deletes that pod and waits for its replacement to answer.
func TestKubePlugins(t *testing.T) {
	now := time.Now()
	cs := fake.NewClientset(pluginPod("p-a-old", "a", "u0", now.Add(-time.Hour)), pluginPod("p-a", "a", "u1", now), pluginPod("p-b", "b", "u2", now))
	var mu sync.Mutex
	var asked []string
	cs.PrependProxyReactor("pods", func(action k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		a := action.(k8stesting.ProxyGetAction)
		mu.Lock()
		asked = append(asked, a.GetName()+":"+a.GetPort()+a.GetPath())
		mu.Unlock()
		return true, proxyBody(`{"decision":{"decision":"dynamic","reason":"supported"}}`), nil
	})
	// The DaemonSet controller: a deleted pod is replaced by a new one on its node.
	cs.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		name := action.(k8stesting.DeleteAction).GetName()
		if name == "p-a" {
			_ = cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "fakecloud-csi", name)
			_ = cs.Tracker().Add(pluginPod("p-a-new", "a", "u3", now.Add(time.Minute)))
			return true, nil, nil
		}
		return false, nil, nil
	})
	k := kubePlugins{cs: cs, namespace: "fakecloud-csi", selector: "app.kubernetes.io/name=fakecloud-csi-node"}
	r := &cellRun{plugins: k, target: "a", row: &Row{}}
	d, reason, err := r.readDecision(context.Background())
	if err != nil || d != "dynamic" || reason != "supported" {
		t.Fatalf("readDecision = %s, %s, %v", d, reason, err)
	}
	if err := k.restart(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("fakecloud-csi").Get(context.Background(), "p-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the plugin pod of node a was not deleted: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"p-a:19809/debug/capacity", "p-a-new:19809/debug/capacity"}
	if len(asked) != 2 || asked[0] != want[0] || asked[1] != want[1] {
		t.Errorf("proxied %v, want %v", asked, want)
	}
	if _, _, err := (kubePlugins{cs: cs, namespace: "fakecloud-csi", selector: "x=y"}).pod(context.Background(), "a"); err == nil {
		t.Error("a selector matching no pod: want an error")
	}
}

// restore puts back the out-of-band slots and the period, and deletes the checks' namespace
// only when the checks created it, waiting for its claims' volumes.
func TestRestore(t *testing.T) {
	for _, tc := range []struct {
		name                string
		saved, now          *int64 // the period saved and the one set by the checks
		createdNS, pvLeft   bool
		wantPeriod          *int64
		wantNSGone, wantErr bool
		wantErrText         string
	}{
		{name: "period 600 back to 10, namespace deleted", saved: ptr[int64](10), now: ptr[int64](600), createdNS: true, wantPeriod: ptr[int64](10), wantNSGone: true},
		{name: "period set back to unset", saved: nil, now: ptr[int64](600), wantPeriod: nil},
		{name: "someone else's namespace stays", saved: ptr[int64](10), now: ptr[int64](10), wantPeriod: ptr[int64](10)},
		{name: "a claim's volume not deleted in time", saved: ptr[int64](10), now: ptr[int64](10), createdNS: true, pvLeft: true,
			wantPeriod: ptr[int64](10), wantNSGone: true, wantErr: true, wantErrText: "PVs of its claims not deleted yet: [pv-1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: localcluster.DriverName}}
			drv.Spec.NodeAllocatableUpdatePeriodSeconds = tc.now
			objs := []runtime.Object{drv, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "checks"}}}
			if tc.pvLeft {
				objs = append(objs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
					Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "checks", Name: "data-stale-0"}}})
			}
			cs := fake.NewClientset(objs...)
			fc := &fakeCloud{in: cloud.Instance{ID: "a", OutOfBandSlots: 3}}
			r := &cellRun{cs: cs, cloud: startFakeCloud(t, fc), target: "a", ns: "checks", createdNS: tc.createdNS, row: &Row{}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			errs := r.restore(ctx, checkState{period: tc.saved, outOfBandSlots: 1})
			if (len(errs) > 0) != tc.wantErr || (tc.wantErr && !strings.Contains(errs[0].Error(), tc.wantErrText)) {
				t.Fatalf("restore = %v, want an error %v (%q)", errs, tc.wantErr, tc.wantErrText)
			}
			if fc.oob() != 1 {
				t.Errorf("out-of-band slots %d, want 1 back", fc.oob())
			}
			got, err := cs.StorageV1().CSIDrivers().Get(context.Background(), localcluster.DriverName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p := got.Spec.NodeAllocatableUpdatePeriodSeconds; (p == nil) != (tc.wantPeriod == nil) || (p != nil && *p != *tc.wantPeriod) {
				t.Errorf("period %v, want %v", p, tc.wantPeriod)
			}
			_, err = cs.CoreV1().Namespaces().Get(context.Background(), "checks", metav1.GetOptions{})
			if apierrors.IsNotFound(err) != tc.wantNSGone {
				t.Errorf("namespace gone %v, want %v", apierrors.IsNotFound(err), tc.wantNSGone)
			}
		})
	}
}

// checkCluster is a cluster where the driver runs on a and c (zone-a): a's count 3, the
// CSIDriver period 10 s, the node plugin pods answering /debug/capacity.
func checkCluster(kubelet string) *fake.Clientset {
	drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: localcluster.DriverName}}
	drv.Spec.NodeAllocatableUpdatePeriodSeconds = ptr[int64](10)
	cs := fake.NewClientset(checkNode("a", "zone-a", kubelet, false), checkNode("c", "zone-a", "v1.37.2", false),
		csiNode("a", ptr[int32](3)), csiNode("c", ptr[int32](7)), drv, pluginPod("p-a", "a", "u1", time.Now()))
	cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	cs.PrependProxyReactor("pods", func(k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		return true, proxyBody(`{"decision":{"decision":"static","reason":"kubelet-gate-off-by-default"}}`), nil
	})
	return cs
}

func checkOptions(cs *fake.Clientset, cc *admin.Client, cells []Cell, out io.Writer) CheckOptions {
	return CheckOptions{Clientset: cs, Cloud: cc, Cells: cells, DriverNamespace: "fakecloud-csi",
		PluginSelector: "app.kubernetes.io/name=fakecloud-csi-node", Namespace: "checks", PodImage: "pause", Cluster: "kind",
		KubeletGates:   func(context.Context, string) (map[string]bool, error) { return map[string]bool{}, nil },
		CleanupTimeout: 10 * time.Second, Out: out}
}

// Ctrl-C while the cloud holds a slot out of band: the checks stop, and the slot and the
// CSIDriver are put back all the same.
func TestRunCheckRestoresOnCancel(t *testing.T) {
	cells, err := ReadCells("cells.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fc := &fakeCloud{in: cloud.Instance{ID: "a", Zone: "zone-a", AttachLimit: 4, OutOfBandSlots: 1}}
	fc.afterPatch = cancel // the first PATCH (one more slot out of band) is followed by Ctrl-C
	cs := checkCluster("v1.34.4")
	var out bytes.Buffer
	row, err := RunCheck(ctx, checkOptions(cs, startFakeCloud(t, fc), cells, &out))
	if err != nil {
		t.Fatalf("RunCheck: %v\n%s", err, out.String())
	}
	if fc.oob() != 1 {
		t.Errorf("out-of-band slots %d after Ctrl-C, want 1 (as found)\n%s", fc.oob(), out.String())
	}
	d, err := cs.StorageV1().CSIDrivers().Get(context.Background(), localcluster.DriverName, metav1.GetOptions{})
	if err != nil || d.Spec.NodeAllocatableUpdatePeriodSeconds == nil || *d.Spec.NodeAllocatableUpdatePeriodSeconds != 10 {
		t.Errorf("CSIDriver after Ctrl-C: %+v, %v; want the period 10 as found", d, err)
	}
	if row.Cell.Name != "cp1.37-kubelet1.34-gate-off-attacher4.13" || row.Cluster != "kind" || row.Node != "a" {
		t.Errorf("row of cell %s on %s node %s", row.Cell.Name, row.Cluster, row.Node)
	}
	if row.Decision != "static" || !row.DecisionRight || !strings.HasPrefix(row.Outcome, "error: count follows") {
		t.Errorf("row decision %s right %v outcome %q", row.Decision, row.DecisionRight, row.Outcome)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "checks", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the checks' namespace exists after the run: %v", err)
	}
}

// Bad options and an existing namespace change nothing.
func TestRunCheckRefuses(t *testing.T) {
	cells, err := ReadCells("cells.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*CheckOptions, *fake.Clientset)
		wantErr string
	}{
		{name: "namespace exists", edit: func(_ *CheckOptions, cs *fake.Clientset) {
			_ = cs.Tracker().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "checks"}})
		}, wantErr: "namespace checks exists"},
		{name: "bad namespace", edit: func(o *CheckOptions, _ *fake.Clientset) { o.Namespace = "../x" }, wantErr: "namespace"},
		{name: "no pod image", edit: func(o *CheckOptions, _ *fake.Clientset) { o.PodImage = "" }, wantErr: "pod image"},
		{name: "bad node", edit: func(o *CheckOptions, _ *fake.Clientset) { o.Node = "a b" }, wantErr: "not a node name"},
		{name: "no such node", edit: func(o *CheckOptions, _ *fake.Clientset) { o.Node = "zz" }, wantErr: "no such node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeCloud{in: cloud.Instance{ID: "a", Zone: "zone-a", AttachLimit: 4, OutOfBandSlots: 1}}
			patched := false
			fc.afterPatch = func() { patched = true }
			cs := checkCluster("v1.37.2")
			o := checkOptions(cs, startFakeCloud(t, fc), cells, io.Discard)
			tc.edit(&o, cs)
			_, err := RunCheck(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("RunCheck = %v, want an error with %q", err, tc.wantErr)
			}
			fc.mu.Lock()
			defer fc.mu.Unlock()
			if patched {
				t.Error("the cloud was patched")
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" {
					t.Errorf("the cluster was changed: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

// A cell's row measured on another cluster (kind) comes right after the cell's own row and
// does not hide it; the latest per cell and cluster is shown; an unmatched cell's row is not
// judged.
func TestTableClusterRows(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 12, 6, h, 0, 0, 0, time.UTC) }
	local := Row{Cell: cell("a"), Date: at(9), Decision: "static", Reason: "kubelet-gate-off-by-default", DecisionRight: true, Outcome: "as expected", Commit: "local1"}
	kindOld := Row{Cell: cell("a"), Cluster: "kind", Node: "w", Date: at(10), Decision: "static", DecisionRight: true, Outcome: "unexpected: old", Commit: "kind1"}
	kindNew := Row{Cell: cell("a"), Cluster: "kind", Node: "w", Date: at(11), Decision: "static", DecisionRight: true, Outcome: "as expected", Commit: "kind2"}
	unmatched := Row{Cell: Cell{Name: "cp1.37-kubelet1.33-attacher4.13-not-in-the-matrix", ControlPlane: "v1.37.2", Kubelet: "v1.33.1", Attacher: "v4.13.0"},
		Cluster: "kind", Node: "w", Date: at(12), Decision: "static", Reason: "kubelet-gate-off-by-default", Commit: "kind3"}
	unmatched.judge()
	if !strings.HasPrefix(unmatched.Outcome, "measured, not judged") {
		t.Errorf("unmatched outcome %q", unmatched.Outcome)
	}
	lines := strings.Split(strings.TrimSpace(Table([]Cell{cell("a"), cell("b")}, []Row{kindNew, local, unmatched, kindOld})), "\n")[2:]
	want := []string{"| a | ", "| a (on kind, node w) | ", "| b | ", "| cp1.37-kubelet1.33-attacher4.13-not-in-the-matrix (on kind, node w) | "}
	if len(lines) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("row %d: %s\nwant it to start with %q", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[0], "local1") || !strings.Contains(lines[1], "kind2") || !strings.Contains(lines[2], "planned (not run)") ||
		!strings.Contains(lines[3], "not judged") || strings.Contains(lines[3], "WRONG") {
		t.Errorf("rows:\n%s", strings.Join(lines, "\n"))
	}
}
