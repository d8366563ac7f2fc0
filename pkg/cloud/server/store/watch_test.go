package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWatchVolume: a watch of a volume is woken by the commits that change its attachment
// (the start and the completion of an attach, a detach, a reset) and by no other commit
// (another volume's, a refused one), and ended watches leave no entry
// behind, whether or not anything woke them.
func TestWatchVolume(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := store.Open("", store.Options{Now: clk.Now, AttachDuration: time.Second, DetachDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	var vols []string
	for i := range 2 {
		v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprintf("v%d", i), SizeBytes: 1, Zone: "z"})
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, v.ID)
	}
	live := func(string) (bool, time.Time) { return true, time.Time{} }
	steps := []struct {
		name  string
		do    func() error
		wakes [2]bool // whether the watches of vols[0] and vols[1] are woken
	}{
		{"attach v0 starts", func() error { _, err := s.Attach(vols[0], "n", nil, nil); return err }, [2]bool{true, false}},
		// A resize bumps the volume's revision, in its state record: a wake-up the waiter
		// reads the volume after and finds its attachment as it was (allowed, see WatchVolume).
		{"resize v0", func() error { _, err := s.Resize(vols[0], 2); return err }, [2]bool{true, false}},
		{"attach v1 starts", func() error { _, err := s.Attach(vols[1], "n", nil, nil); return err }, [2]bool{false, true}},
		{"nothing due", func() error { _, _, err := s.CompleteDue(live); return err }, [2]bool{false, false}},
		{"both complete", func() error { clk.advance(time.Second); _, _, err := s.CompleteDue(live); return err }, [2]bool{true, true}},
		{"detach v1 starts", func() error { _, err := s.Detach(vols[1], "n", nil); return err }, [2]bool{false, true}},
		{"a refused delete", func() error {
			if err := func() error { _, err := s.DeleteVolume(vols[0]); return err }(); cloud.CodeOf(err) != cloud.CodeVolumeInUse {
				return fmt.Errorf("delete of an attached volume: %w, want VolumeInUse", err)
			}
			return nil
		}, [2]bool{false, false}},
		{"reset", func() error { _, err := s.Reset(testState()); return err }, [2]bool{true, true}},
	}
	for _, st := range steps {
		var chans [2]<-chan struct{}
		var stops [2]func()
		for i, id := range vols {
			chans[i], stops[i] = s.WatchVolume(id)
		}
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for i := range vols {
			if got := closed(chans[i]); got != st.wakes[i] {
				t.Errorf("%s: watch of v%d woken %v, want %v", st.name, i, got, st.wakes[i])
			}
			stops[i]()
			stops[i]() // a second stop is harmless
		}
		if n := store.Watched(s); n != 0 {
			t.Fatalf("%s: %d volumes still watched after every watch ended", st.name, n)
		}
	}
	// Many watches of one volume that nothing wakes: the entry goes with the last.
	var stops []func()
	for range 100 {
		_, stop := s.WatchVolume("vol-x")
		stops = append(stops, stop)
	}
	for i, stop := range stops {
		if n := store.Watched(s); n != 1 {
			t.Fatalf("%d of 100 watches ended: %d volumes watched, want 1", i, n)
		}
		stop()
	}
	if n := store.Watched(s); n != 0 {
		t.Fatalf("%d volumes watched after every watch ended, want 0", n)
	}
}
