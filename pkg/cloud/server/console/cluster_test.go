package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console/consoletest"
)

const driver = console.DefaultDriverName

// newKube is a fake API server (kubeapitest) holding objs: the cluster the tests' console
// reads.
func newKube(t testing.TB, objs ...runtime.Object) *kubeapitest.Server {
	t.Helper()
	return kubeapitest.New(t, objs...)
}

// newConsole is a console whose cluster view reads kube's cluster through consoletest's API
// server, over HTTP as from a real one.
func newConsole(t *testing.T, kube *kubeapitest.Server, now func() time.Time) *console.Console {
	t.Helper()
	c, err := console.New(console.Config{Kube: consoletest.Client(t, kube), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clock is a settable clock for the cluster view's cache.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func csiNode(name string, drivers ...storagev1.CSINodeDriver) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: drivers}}
}

func csiDriver(name, nodeID string, count *int32) storagev1.CSINodeDriver {
	d := storagev1.CSINodeDriver{Name: name, NodeID: nodeID}
	if count != nil {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: count}
	}
	return d
}

func va(name, attacher, node string, attached bool, attachErr string) *storagev1.VolumeAttachment {
	v := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   storagev1.VolumeAttachmentSpec{Attacher: attacher, NodeName: node},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
	if attachErr != "" {
		v.Status.AttachError = &storagev1.VolumeError{Message: attachErr}
	}
	return v
}

func pod(ns, name, node string, phase corev1.PodPhase, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func warning(ns, podName, reason, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%s.%d", podName, reason, at.Unix())},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: podName},
		Type:           corev1.EventTypeWarning, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(at)}
}

// TestClusterView reads a cluster of a fake API server (kubeapitest): the driver's CSINode entries
// (not another driver's), its VolumeAttachments per node, Pending pods with the reason that
// explains each (the scheduler's for an unscheduled pod, the newest Warning event, else the
// waiting container's), and nothing else; all by LIST calls only.
func TestClusterView(t *testing.T) {
	unschedulable := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/2 nodes are available: 2 node(s) exceed max volume count.", LastTransitionTime: metav1.NewTime(t0.Add(-30 * time.Second))}}
	}
	creating := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	}
	kube := newKube(t,
		csiNode("k8s-a", csiDriver("other.csi.example", "x", new(int32(99))), csiDriver(driver, "node-a1", new(int32(7)))),
		csiNode("k8s-b", csiDriver(driver, "node-a2", nil)),
		csiNode("k8s-c", csiDriver("other.csi.example", "y", new(int32(3)))),
		va("va-1", driver, "k8s-a", true, ""),
		va("va-2", driver, "k8s-a", false, "rpc error: code = ResourceExhausted desc = node-a1: no free attach slot"),
		va("va-3", "other.csi.example", "k8s-a", true, ""),
		va("va-4", driver, "k8s-gone", false, ""),
		pod("default", "web-2", "", corev1.PodPending, unschedulable),
		pod("default", "web-1", "k8s-a", corev1.PodPending, creating),
		pod("default", "web-0", "k8s-a", corev1.PodPending, creating),
		pod("default", "db-0", "k8s-b", corev1.PodPending, creating),
		pod("default", "running", "k8s-a", corev1.PodRunning),
		warning("default", "web-1", "FailedMount", "old", t0.Add(-50*time.Second)),
		warning("default", "web-1", "FailedAttachVolume", "AttachVolume.Attach failed: no free attach slot", t0.Add(-10*time.Second)),
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "n"}, Type: corev1.EventTypeNormal, Reason: "Scheduled",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0"}},
	)
	clk := &clock{t: t0}
	c := newConsole(t, kube, clk.now)
	got := c.Cluster(context.Background())
	want := console.ClusterView{
		Enabled: true, Driver: driver, ObservedAt: t0,
		Nodes: []console.ClusterNode{
			{Name: "k8s-a", NodeID: "node-a1", Allocatable: new(int32(7)), Attached: 1, Attaching: 1, AttachErrors: 1,
				LastAttachError: "rpc error: code = ResourceExhausted desc = node-a1: no free attach slot",
				Pending: []console.PendingPod{
					{Namespace: "default", Name: "web-0", Reason: "ContainerCreating", Since: t0.Add(-time.Minute)},
					{Namespace: "default", Name: "web-1", Reason: "FailedAttachVolume", Message: "AttachVolume.Attach failed: no free attach slot", Since: t0.Add(-10 * time.Second)},
				}},
			{Name: "k8s-b", NodeID: "node-a2", Pending: []console.PendingPod{{Namespace: "default", Name: "db-0", Reason: "ContainerCreating", Since: t0.Add(-time.Minute)}}},
			{Name: "k8s-c", Pending: []console.PendingPod{}},
			{Name: "k8s-gone", Attaching: 1, Pending: []console.PendingPod{}},
		},
		Unscheduled: []console.PendingPod{{Namespace: "default", Name: "web-2", Reason: "Unschedulable",
			Message: "0/2 nodes are available: 2 node(s) exceed max volume count.", Since: t0.Add(-30 * time.Second)}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("cluster view (-want +got):\n%s", d)
	}
	// Only lists, one page of MaxClusterObjects each, Pending pods and Warning pod events
	// selected by the API server (this fake ignores field selectors: the view filters again).
	wantFields := map[string]string{"csinodes": "", "volumeattachments": "", "pods": "status.phase=Pending",
		"events": "type=Warning,involvedObject.kind=Pod"}
	for _, l := range kube.Actions() {
		if l.Verb != "list" {
			t.Errorf("the cluster view called %s %s: it may only list", l.Verb, l.Resource)
			continue
		}
		res := l.Resource
		if f, ok := wantFields[res]; !ok || l.ListOptions.Limit != console.MaxClusterObjects || l.ListOptions.FieldSelector != f ||
			l.Namespace != metav1.NamespaceAll {
			t.Errorf("list %s in namespace %q with %+v: want limit %d, field selector %q, every namespace", res, l.Namespace, l.ListOptions,
				console.MaxClusterObjects, f)
		}
		delete(wantFields, res)
	}
	if len(wantFields) != 0 {
		t.Errorf("the cluster view did not list %v", wantFields)
	}
	// The JSON the page reads: a node without an allocatable count says null, not 0 (which
	// CSINode would mean as "no volumes").
	b, err := json.Marshal(got.Nodes[1])
	if err != nil || !strings.Contains(string(b), `"allocatable":null`) {
		t.Fatalf("node JSON %s (%v): want allocatable null", b, err)
	}
}

// TestClusterViewCache: readings within ClusterRefresh share one set of lists; after it the
// view reads the cluster again and shows the change.
func TestClusterViewCache(t *testing.T) {
	kube := newKube(t, csiNode("k8s-a", csiDriver(driver, "node-a1", new(int32(7)))))
	clk := &clock{t: t0}
	c := newConsole(t, kube, clk.now)
	ctx := context.Background()
	lists := func() int { return len(kube.Actions()) }
	first := c.Cluster(ctx)
	perReading := lists()
	if perReading != 4 {
		t.Fatalf("one reading made %d calls, want 4 lists (CSINodes, VolumeAttachments, pods, events)", perReading)
	}
	if err := kube.Put(csiNode("k8s-a", csiDriver(driver, "node-a1", new(int32(3))))); err != nil {
		t.Fatal(err)
	}
	kube.ClearActions()
	clk.add(console.ClusterRefresh - time.Millisecond)
	if got := c.Cluster(ctx); lists() != 0 || *got.Nodes[0].Allocatable != 7 || !got.ObservedAt.Equal(first.ObservedAt) {
		t.Fatalf("within the refresh: %d calls, allocatable %d; want the cached reading", lists(), *got.Nodes[0].Allocatable)
	}
	clk.add(time.Millisecond)
	if got := c.Cluster(ctx); lists() != perReading || *got.Nodes[0].Allocatable != 3 {
		t.Fatalf("after the refresh: %d calls, allocatable %d; want a new reading with 3", lists(), *got.Nodes[0].Allocatable)
	}
}

// TestClusterViewBounds: a list with more than MaxClusterObjects items, or with a continue
// token, shows its first MaxClusterObjects and is named truncated; a list the cluster refuses
// is the view's error, with nothing else shown; no kubeconfig is a disabled view.
func TestClusterViewBounds(t *testing.T) {
	var objs []runtime.Object
	for i := range console.MaxClusterObjects + 1 {
		objs = append(objs, csiNode(fmt.Sprintf("k8s-%04d", i), csiDriver(driver, fmt.Sprintf("node-%04d", i), new(int32(1)))))
	}
	// This fake ignores the limit (as an old server may): the view cuts the list itself.
	// VolumeAttachments come as an API server that honours it sends them: one page and a
	// continue token.
	many := newKube(t, objs...)
	many.PrependReactor("list", "volumeattachments", func(kubeapitest.Action) (bool, runtime.Object, error) {
		return true, &storagev1.VolumeAttachmentList{ListMeta: metav1.ListMeta{Continue: "page-2"},
			Items: []storagev1.VolumeAttachment{*va("va-1", driver, "k8s-0000", true, "")}}, nil
	})
	got := newConsole(t, many, time.Now).Cluster(context.Background())
	if len(got.Nodes) != console.MaxClusterObjects || !cmp.Equal(got.Truncated, []string{"CSINodes", "VolumeAttachments"}) || got.Nodes[0].Attached != 1 {
		t.Fatalf("%d nodes, truncated %v, %d attached on the first; want %d, [CSINodes VolumeAttachments] and 1", len(got.Nodes), got.Truncated,
			got.Nodes[0].Attached, console.MaxClusterObjects)
	}

	refused := newKube(t, csiNode("k8s-a", csiDriver(driver, "node-a1", new(int32(7)))))
	refused.PrependReactor("list", "pods", func(kubeapitest.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("RBAC says no"))
	})
	got = newConsole(t, refused, time.Now).Cluster(context.Background())
	if !got.Enabled || got.Error != "list Pending pods: pods is forbidden: RBAC says no" || len(got.Nodes) != 0 {
		t.Fatalf("refused view %+v: want enabled, the error, no nodes", got)
	}

	c, err := console.New(console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Cluster(context.Background()); got.Enabled || got.Nodes == nil || got.Unscheduled == nil {
		t.Fatalf("view without a cluster %+v: want disabled, with empty lists", got)
	}
	if _, err := console.New(console.Config{DriverName: "not a driver!"}); err == nil || !strings.Contains(err.Error(), "CSI driver name") {
		t.Fatalf("New with a bad driver name: %v", err)
	}
}
