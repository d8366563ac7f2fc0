package localcluster

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestRegistrar(t *testing.T) {
	t.Run("in order, all", func(t *testing.T) {
		var mu sync.Mutex
		var got []int
		r := newRegistrar(func(i int) error { mu.Lock(); got = append(got, i); mu.Unlock(); return nil })
		if err := r.add(0, 3); err != nil {
			t.Fatal(err)
		}
		if err := r.add(3, 5); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
			t.Errorf("registered %v, want 0..4 in order", got)
		}
	})
	t.Run("the first error stops it", func(t *testing.T) {
		boom := errors.New("boom")
		var calls []int
		block := make(chan struct{})
		r := newRegistrar(func(i int) error {
			calls = append(calls, i)
			if i == 1 {
				close(block)
				return boom
			}
			return nil
		})
		if err := r.add(0, 4); err != nil {
			t.Fatal(err)
		}
		<-block
		if err := r.wait(); !errors.Is(err, boom) {
			t.Errorf("wait = %v, want boom", err)
		}
		if !slices.Equal(calls, []int{0, 1}) {
			t.Errorf("registered %v after the failure of 1, want [0 1]", calls)
		}
		if err := r.add(4, 5); !errors.Is(err, boom) {
			t.Errorf("add after a failure = %v, want boom", err)
		}
	})
	t.Run("abort skips what is queued", func(t *testing.T) {
		release := make(chan struct{})
		var calls []int
		r := newRegistrar(func(i int) error { calls = append(calls, i); <-release; return nil })
		if err := r.add(0, 3); err != nil {
			t.Fatal(err)
		}
		r.abort()
		close(release)
		<-r.done
		if len(calls) > 1 {
			t.Errorf("registered %v after abort, want at most the one under way", calls)
		}
	})
}
