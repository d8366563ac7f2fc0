package store

import (
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// maxCachedRecs bounds a recCache: past it the cache starts empty again.
const maxCachedRecs = 4096

// recCache maps a stored JSON record, by its exact bytes, to its decoded value. Every attach
// and detach reads the volume's, the instance's and the instance type's JSON records, which
// change only on create, patch, resize and modify: decoding them each time was about a tenth
// of the server's CPU per attach besides the commit. Keyed by content, the cache cannot go
// stale: a record that changed, in a transaction committed or not, has other bytes and
// misses. clone copies what a value points to, so that no two callers share memory (nil:
// the type holds values only). Safe for concurrent use.
type recCache[T any] struct {
	clone func(T) T
	mu    sync.Mutex
	m     map[string]T
}

// get returns the value decoded from data; ok is false when data was not seen.
func (c *recCache[T]) get(data []byte) (v T, ok bool) {
	c.mu.Lock()
	v, ok = c.m[string(data)] // no allocation: the compiler looks up string(data) in place
	c.mu.Unlock()
	if ok && c.clone != nil {
		v = c.clone(v)
	}
	return v, ok
}

func (c *recCache[T]) put(data []byte, v T) {
	if c.clone != nil {
		v = c.clone(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedRecs {
		c.m = make(map[string]T)
	}
	c.m[string(data)] = v
}

// getJSON is the package's getJSON through the cache: whether key is in b, and its decoded
// value into v.
func (c *recCache[T]) getJSON(b *bolt.Bucket, key []byte, v *T) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	if cached, ok := c.get(data); ok {
		*v = cached
		return true, nil
	}
	var fresh T
	if ok, err := getJSON(b, key, &fresh); err != nil || !ok {
		return ok, err
	}
	c.put(data, fresh)
	*v = fresh
	return true, nil
}

// recCaches are the store's caches, one per record type read on every attach.
type recCaches struct {
	volumes   recCache[volumeRec]
	instances recCache[instanceRec]
	types     recCache[cloud.InstanceType]
}

func newRecCaches() *recCaches {
	return &recCaches{
		instances: recCache[instanceRec]{clone: func(r instanceRec) instanceRec {
			r.AttachLimitOverride = cloneInt(r.AttachLimitOverride)
			return r
		}},
		types: recCache[cloud.InstanceType]{clone: func(t cloud.InstanceType) cloud.InstanceType {
			t.AttachDurationMS, t.DetachDurationMS = cloneInt(t.AttachDurationMS), cloneInt(t.DetachDurationMS)
			return t
		}},
	}
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
