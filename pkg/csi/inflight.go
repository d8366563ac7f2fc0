package csi

import "sync"

// inflight is the set of keys (volume IDs, names) with an operation running in this process.
// A second operation on the same key is refused with ABORTED instead of queueing, so that a
// retrying CO cannot pile up requests against the cloud (CSI spec, "Concurrency"; the shape
// follows aws-ebs-csi-driver's inflight package).
type inflight struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func newInflight() *inflight { return &inflight{keys: map[string]struct{}{}} }

// tryAcquire marks key busy and reports true, or reports false when it already is.
func (f *inflight) tryAcquire(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, busy := f.keys[key]; busy {
		return false
	}
	f.keys[key] = struct{}{}
	return true
}

func (f *inflight) release(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.keys, key)
}

// len returns the number of busy keys.
func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.keys)
}
