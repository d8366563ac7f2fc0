package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// The cache answers by content: the same bytes give the record decoded from them, other bytes
// (a resized volume) miss, and it never holds more than maxCachedRecs.
func TestRecCacheByContent(t *testing.T) {
	var c recCache[volumeRec]
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

// Values with pointers are copied in and out: a caller that changes what it got changes
// neither the cache nor another caller's copy.
func TestRecCacheSharesNothing(t *testing.T) {
	c := newRecCaches()
	five := 5
	key := []byte(`{"name":"t"}`)
	c.types.put(key, cloud.InstanceType{Name: "t", AttachDurationMS: &five})
	five = 6 // the value put is a copy
	got, _ := c.types.get(key)
	*got.AttachDurationMS = 7
	again, _ := c.types.get(key)
	if *again.AttachDurationMS != 5 {
		t.Errorf("attachDurationMs after changes outside the cache = %d, want 5", *again.AttachDurationMS)
	}
	limit := 3
	c.instances.put(key, instanceRec{ID: "i", AttachLimitOverride: &limit})
	ri, _ := c.instances.get(key)
	*ri.AttachLimitOverride = 9
	if rj, _ := c.instances.get(key); *rj.AttachLimitOverride != 3 {
		t.Errorf("attachLimitOverride after a change outside the cache = %d, want 3", *rj.AttachLimitOverride)
	}
}
