package store

import "sync"

// watchers tells the callers of WatchVolume when a commit changed a volume's attachment:
// its state record (attachedTo, revision), its phase (attaching, attached, detaching,
// detached, error), or the volume itself (deleted, or every volume at a reset). It holds an
// entry only for a volume somebody watches, so it is bounded by the watchers, and an entry
// goes with its last watcher or its volume's next change.
type watchers struct {
	mu   sync.Mutex
	vols map[string]*watch
}

// watch is one volume's watchers: changed is closed at the volume's next committed change.
type watch struct {
	changed chan struct{}
	refs    int
}

func newWatchers() *watchers { return &watchers{vols: map[string]*watch{}} }

// WatchVolume returns a channel closed after the next commit that changes volume id's
// attachment or deletes it (a reset counts for every volume), and the function that ends the
// watch; call it when done, whether or not the channel was closed. Read the volume after
// WatchVolume, not before: a change committed in between then shows in the reading, and one
// committed after it closes the channel. A change may close it without the reading having
// moved on (another field, or a commit that left the state as it was): read again.
func (s *Store) WatchVolume(id string) (changed <-chan struct{}, stop func()) {
	w := s.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.vols[id]
	if e == nil {
		e = &watch{changed: make(chan struct{})}
		w.vols[id] = e
	}
	e.refs++
	var once sync.Once
	return e.changed, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if e.refs--; e.refs == 0 && w.vols[id] == e {
				delete(w.vols, id)
			}
		})
	}
}

// notify wakes the watchers of the volumes a commit changed, or of all when all is set.
func (w *watchers) notify(ids []string, all bool) {
	if len(ids) == 0 && !all {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if all {
		for id, e := range w.vols {
			close(e.changed)
			delete(w.vols, id)
		}
		return
	}
	for _, id := range ids {
		if e := w.vols[id]; e != nil {
			close(e.changed)
			delete(w.vols, id)
		}
	}
}
