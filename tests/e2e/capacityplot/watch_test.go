package capacityplot

import (
	"context"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

const drv = "disk.fakecloud.dev"

func csiNode(name, rv string, count *int32, others ...string) *storagev1.CSINode {
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	d := storagev1.CSINodeDriver{Name: drv, NodeID: "i-" + name}
	if count != nil {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: count}
	}
	cn.Spec.Drivers = append(cn.Spec.Drivers, d)
	for _, o := range others {
		c := int32(99)
		cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: o, NodeID: "x", Allocatable: &storagev1.VolumeNodeResources{Count: &c}})
	}
	return cn
}

func i32(v int32) *int32 { return &v }

func TestWatcherHandler(t *testing.T) {
	clock := t0
	w := NewWatcher(drv, func() time.Time { clock = clock.Add(time.Second); return clock })
	h := w.Handler()
	h.OnAdd(csiNode("a", "1", i32(7)), true)
	h.OnAdd(csiNode("b", "1", nil), true)
	h.OnUpdate(csiNode("a", "1", i32(7)), csiNode("a", "1", i32(7)))                     // resync: nothing
	h.OnUpdate(csiNode("a", "1", i32(7)), csiNode("a", "2", i32(7), "other.csi.dev"))    // write, same count
	h.OnUpdate(csiNode("a", "2", i32(7)), csiNode("a", "3", i32(5)))                     // write, count change
	h.OnUpdate(csiNode("b", "1", nil), csiNode("b", "2", i32(3)))                        // allocatable appears
	h.OnAdd(csiNode("c", "5", i32(2)), false)                                            // new node during the run
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "a", Obj: csiNode("a", "3", i32(5))}) // node gone
	h.OnAdd("not a CSINode", false)

	r := w.Result()
	if got := r.Writes; got["a"] != 3 || got["b"] != 1 || got["c"] != 1 {
		t.Errorf("writes: expected a=3 b=1 c=1, got %v", got)
	}
	if r.Initial["a"] == nil || *r.Initial["a"] != 7 || r.Initial["b"] != nil {
		t.Errorf("initial: expected a=7 b=none, got a=%s b=%s", fmtCount(r.Initial["a"]), fmtCount(r.Initial["b"]))
	}
	if r.NodeIDs["a"] != "i-a" || r.NodeIDs["c"] != "i-c" {
		t.Errorf("node IDs: %v", r.NodeIDs)
	}
	want := []struct {
		node, from, to string
	}{{"a", "7", "5"}, {"b", "none", "3"}, {"c", "none", "2"}, {"a", "5", "none"}}
	if len(r.Changes) != len(want) {
		t.Fatalf("expected %d changes, got %+v", len(want), r.Changes)
	}
	for i, wc := range want {
		c := r.Changes[i]
		if c.Node != wc.node || fmtCount(c.Old) != wc.from || fmtCount(c.New) != wc.to {
			t.Errorf("change %d: expected %s %s->%s, got %s %s->%s", i, wc.node, wc.from, wc.to, c.Node, fmtCount(c.Old), fmtCount(c.New))
		}
	}
	if !r.Changes[0].At.After(t0) || !r.Changes[1].At.After(r.Changes[0].At) {
		t.Errorf("change times must come from the clock in order: %v, %v", r.Changes[0].At, r.Changes[1].At)
	}
}

// TestWatcherWithInformer runs the watcher behind a real informer on a fake
// clientset: the object listed first is the start, an update is a change.
func TestWatcherWithInformer(t *testing.T) {
	cs := fake.NewClientset(csiNode("n", "1", i32(7)))
	w := NewWatcher(drv, nil)
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Storage().V1().CSINodes().Informer()
	reg, err := inf.AddEventHandler(w.Handler())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, err := cs.StorageV1().CSINodes().Update(ctx, csiNode("n", "2", i32(4)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(w.Result().Changes) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r := w.Result()
	if len(r.Changes) != 1 || fmtCount(r.Changes[0].New) != "4" || fmtCount(r.Initial["n"]) != "7" || r.Writes["n"] != 1 {
		t.Errorf("expected start 7, one write to 4; got initial %s, writes %v, changes %+v", fmtCount(r.Initial["n"]), r.Writes, r.Changes)
	}
}
