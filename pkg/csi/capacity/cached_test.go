package capacity

import (
	"context"
	"testing"
	"time"
)

// TestCachedMaxVolumesPerNode asserts NodeGetInfo's fast path answers what MaxVolumesPerNode
// would when no lookup is due, and does nothing (no lookup, ok false) when one is.
func TestCachedMaxVolumesPerNode(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	r, clk, _ := newTestReporter(t, DefaultConfig(), src)
	if v, ok := r.CachedMaxVolumesPerNode(ctx); ok {
		t.Fatalf("before the first lookup: CachedMaxVolumesPerNode = %d, ok; want not ok (a lookup is due)", v)
	}
	if n := src.callCount(); n != 0 {
		t.Fatalf("CachedMaxVolumesPerNode looked the cloud up %d times, want 0", n)
	}
	want := mustValue(t, r)
	src.set(reading(8, 1, 3, 100, 2), nil)
	for range 3 {
		if v, ok := r.CachedMaxVolumesPerNode(ctx); !ok || v != want {
			t.Fatalf("within the min interval: CachedMaxVolumesPerNode = %d, %v; want %d, true", v, ok, want)
		}
	}
	clk.Step(2 * DefaultMinInterval)
	if v, ok := r.CachedMaxVolumesPerNode(ctx); ok {
		t.Fatalf("after the interval: CachedMaxVolumesPerNode = %d, ok; want not ok", v)
	}
	if n := src.callCount(); n != 1 {
		t.Fatalf("lookups = %d, want 1 (CachedMaxVolumesPerNode makes none)", n)
	}
}

func TestStaticCachedMaxVolumesPerNode(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource(reading(16, 1, 3, 100, 1))
	s, err := NewStatic(src, "i-1", "test", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.CachedMaxVolumesPerNode(ctx); ok {
		t.Fatalf("before the first lookup: CachedMaxVolumesPerNode = %d, ok; want not ok", v)
	}
	want, err := s.MaxVolumesPerNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.CachedMaxVolumesPerNode(ctx); !ok || v != want {
		t.Fatalf("CachedMaxVolumesPerNode = %d, %v; want %d, true", v, ok, want)
	}
	if n := src.callCount(); n != 1 {
		t.Fatalf("lookups = %d, want 1", n)
	}
}
