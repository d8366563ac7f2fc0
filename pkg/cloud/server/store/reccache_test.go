package store

import (
	"fmt"
	"testing"
	"time"
)

// The cache answers by content: the same bytes give the record decoded from them, other bytes
// (a resized volume) miss, and it never holds more than maxCachedRecs.
func TestRecCacheByContent(t *testing.T) {
	var c recCache
	a := volumeRec{ID: "vol-1", Name: "a", SizeBytes: 1, Zone: "z", CreatedAt: time.Unix(1, 0).UTC()}
	c.put([]byte(`{"id":"vol-1","sizeBytes":1}`), a)
	if got, ok := c.get([]byte(`{"id":"vol-1","sizeBytes":1}`)); !ok || got != a {
		t.Errorf("same bytes: got %+v, %v; want %+v", got, ok, a)
	}
	if _, ok := c.get([]byte(`{"id":"vol-1","sizeBytes":2}`)); ok {
		t.Error("other bytes of the same volume hit the cache")
	}
	for i := range maxCachedRecs + 10 {
		c.put(fmt.Appendf(nil, "rec-%d", i), a)
	}
	if n := len(c.m); n > maxCachedRecs {
		t.Errorf("cache holds %d records, want at most %d", n, maxCachedRecs)
	}
}
