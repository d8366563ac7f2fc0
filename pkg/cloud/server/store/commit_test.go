package store_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// TestQueuedMutationsShareTheNextCommit holds the writer with one attach (its planner blocks
// inside its transaction) while others arrive one after the other, then lets it go: every
// mutation that queued while the writer was busy must go in the one commit that follows,
// however long each waited. bbolt's DB.Batch, which the store used before (issue 28), started
// a batch when its 1 ms timer fired even though the writer was still busy: a mutation that
// came later went to the commit after, so with slow fdatasyncs commits held fewer mutations
// and the writer sat idle while batches waited for their timers. The pause between arrivals
// only makes sure the old timer had fired; the count checked holds for any pause.
func TestQueuedMutationsShareTheNextCommit(t *testing.T) {
	s, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := store.State{
		InstanceTypes: []cloud.InstanceType{{Name: "t", MaxAttachments: 16}},
		Instances:     []store.SeedInstance{{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "n", Zone: "z", InstanceType: "t"}}},
		Quotas:        store.Limits{Attachments: 100, Volumes: 100, CapacityBytes: 1 << 40},
	}
	if _, err := s.SeedIfEmpty(st); err != nil {
		t.Fatal(err)
	}
	const later = 4
	var vols []string
	for i := range 1 + later {
		v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprint("v", i), SizeBytes: 1, Zone: "z"})
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, v.ID)
	}
	tx0, err := store.LastTxID(s)
	if err != nil {
		t.Fatal(err)
	}

	inTx, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func() store.TransitionPlan {
		once.Do(func() { close(inTx); <-release })
		return store.TransitionPlan{}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1+later)
	wg.Go(func() {
		if _, err := s.Attach(vols[0], "n", nil, hold); err != nil {
			errs <- err
		}
	})
	<-inTx // the first attach holds the writer
	for i := range later {
		wg.Go(func() {
			if _, err := s.Attach(vols[1+i], "n", nil, nil); err != nil {
				errs <- err
			}
		})
		waitQueued(t, s, i+1)
		time.Sleep(3 * store.OldBatchDelay)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tx1, err := store.LastTxID(s)
	if err != nil {
		t.Fatal(err)
	}
	if commits := tx1 - tx0; commits != 2 {
		t.Errorf("the held attach and the %d queued behind it took %d commits, want 2 (its own and one shared)", later, commits)
	}
	for _, id := range vols {
		if v, err := s.GetVolume(id); err != nil || v.AttachedTo != "n" {
			t.Errorf("volume %s: %+v, %v; want attached to n", id, v, err)
		}
	}
}

// waitQueued waits until n mutations wait for a shared commit.
func waitQueued(t *testing.T, s *store.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for store.QueuedMutations(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d mutations queued after 30 s, want %d", store.QueuedMutations(s), n)
		}
		runtime.Gosched()
	}
}
