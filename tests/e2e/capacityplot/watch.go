package capacityplot

import (
	"sync"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// Watcher records every change of one driver's allocatable.count in CSINode
// objects and counts CSINode writes per node. Feed it through Handler (a
// client-go informer event handler); it is safe for concurrent use.
type Watcher struct {
	driver string
	now    func() time.Time

	mu      sync.Mutex
	initial map[string]*int64
	nodeIDs map[string]string
	writes  map[string]int
	changes []CountChange
}

// NewWatcher returns a watcher of driver's entries; now nil means time.Now.
func NewWatcher(driver string, now func() time.Time) *Watcher {
	if now == nil {
		now = time.Now
	}
	return &Watcher{driver: driver, now: now, initial: map[string]*int64{}, nodeIDs: map[string]string{}, writes: map[string]int{}}
}

// Handler is the informer event handler: objects of the initial list set
// the starting counts; later adds, updates with a new resourceVersion and
// deletes are writes.
func (w *Watcher) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			cn, ok := obj.(*storagev1.CSINode)
			if !ok {
				return
			}
			w.observe(nil, cn, initial)
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*storagev1.CSINode)
			n, ok2 := newObj.(*storagev1.CSINode)
			if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
				return // a resync, not a write
			}
			w.observe(o, n, false)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			cn, ok := obj.(*storagev1.CSINode)
			if !ok {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.writes[cn.Name]++
			if old := w.count(cn); old != nil {
				w.changes = append(w.changes, CountChange{Node: cn.Name, At: w.now(), ResourceVersion: cn.ResourceVersion, Old: old})
			}
		},
	}
}

func (w *Watcher) observe(old, cur *storagev1.CSINode, initial bool) {
	at := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	newCount := w.count(cur)
	for _, d := range cur.Spec.Drivers {
		if d.Name == w.driver {
			w.nodeIDs[cur.Name] = d.NodeID
		}
	}
	if initial {
		w.initial[cur.Name] = newCount
		return
	}
	w.writes[cur.Name]++
	var oldCount *int64
	if old != nil {
		oldCount = w.count(old)
	}
	if !equalCount(oldCount, newCount) {
		w.changes = append(w.changes, CountChange{Node: cur.Name, At: at, ResourceVersion: cur.ResourceVersion, Old: oldCount, New: newCount})
	}
}

// count is the driver's allocatable.count in cn; nil when absent.
func (w *Watcher) count(cn *storagev1.CSINode) *int64 {
	for _, d := range cn.Spec.Drivers {
		if d.Name == w.driver && d.Allocatable != nil && d.Allocatable.Count != nil {
			v := int64(*d.Allocatable.Count)
			return &v
		}
	}
	return nil
}

func equalCount(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// WatchResult is what a Watcher saw.
type WatchResult struct {
	// Initial is the count per node when the watch started.
	Initial map[string]*int64
	// NodeIDs maps node name to the driver's node ID (the cloud instance).
	NodeIDs map[string]string
	// Writes counts CSINode writes per node after the start.
	Writes map[string]int
	// Changes are the count changes in the order seen.
	Changes []CountChange
}

// Result copies what the watcher has seen so far.
func (w *Watcher) Result() WatchResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := WatchResult{Initial: map[string]*int64{}, NodeIDs: map[string]string{}, Writes: map[string]int{}, Changes: append([]CountChange(nil), w.changes...)}
	for k, v := range w.initial {
		r.Initial[k] = v
	}
	for k, v := range w.nodeIDs {
		r.NodeIDs[k] = v
	}
	for k, v := range w.writes {
		r.Writes[k] = v
	}
	return r
}
