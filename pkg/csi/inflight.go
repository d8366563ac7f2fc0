package csi

import "sync"

// inflight is the set of keys (volume IDs, names) with an operation running in this process.
// A second operation on the same key is refused with ABORTED instead of queueing, so that a
// retrying CO cannot pile up requests against the cloud (CSI spec, "Concurrency"; the shape
// follows aws-ebs-csi-driver's inflight package). The one exception is a repeat of the very
// same operation (tryJoin with the same op): a publish retried for the same (volume, node)
// while the first one still waits for the cloud's attach joins it instead of failing.
type inflight struct {
	mu   sync.Mutex
	keys map[string]*hold
}

// hold is one key's operation: op names it ("" for one that admits no company), n counts the
// calls sharing it.
type hold struct {
	op string
	n  int
}

func newInflight() *inflight { return &inflight{keys: map[string]*hold{}} }

// tryAcquire marks key busy and reports true, or reports false when it already is.
func (f *inflight) tryAcquire(key string) bool { return f.tryJoin(key, "") }

// tryJoin marks key busy with op and reports true, or joins the calls already running op on
// key (op not ""); it reports false when key is busy with another operation.
func (f *inflight) tryJoin(key, op string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, busy := f.keys[key]; busy {
		if op == "" || h.op != op {
			return false
		}
		h.n++
		return true
	}
	f.keys[key] = &hold{op: op, n: 1}
	return true
}

// release ends one call's hold of key; the key is free when the last one ends.
func (f *inflight) release(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, busy := f.keys[key]; busy {
		if h.n--; h.n <= 0 {
			delete(f.keys, key)
		}
	}
}

// len returns the number of busy keys.
func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.keys)
}
