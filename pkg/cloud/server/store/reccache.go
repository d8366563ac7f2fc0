package store

import "sync"

// maxCachedRecs bounds recCache: past it the cache starts empty again.
const maxCachedRecs = 4096

// recCache maps a stored volume record, by its exact bytes, to its decoded value. Every attach
// and detach reads the volume's JSON record, which changes only on create, resize and modify:
// decoding it each time was a tenth of the server's CPU per attach besides the commit. Keyed
// by content, the cache cannot go stale: a record that changed, in a transaction committed or
// not, has other bytes and misses. volumeRec holds values only (no slice, map or pointer), so
// a copy handed out shares nothing. Safe for concurrent use.
type recCache struct {
	mu sync.Mutex
	m  map[string]volumeRec
}

func (c *recCache) get(data []byte) (volumeRec, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.m[string(data)] // no allocation: the compiler looks up string(data) in place
	return rec, ok
}

func (c *recCache) put(data []byte, rec volumeRec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedRecs {
		c.m = make(map[string]volumeRec)
	}
	c.m[string(data)] = rec
}
