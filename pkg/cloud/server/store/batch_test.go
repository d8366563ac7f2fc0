package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// ack is what a caller was told: an acknowledged attach (with the revision it returned), or
// an acknowledged detach.
type ack struct {
	attach   bool
	volumeID string
	instance string
	rev      uint64
}

// TestBatchedMutationsApplyExactlyOnce runs many concurrent attaches and detaches on a few
// volumes, mixed with mutations that fail after writing (an auto-registering attach of a
// missing volume), which makes bbolt roll back the batch they share and re-run the others.
// The final state, the event log and what the callers were told must agree: every
// acknowledged attach has exactly one VolumeAttached event, nothing failed left a trace, and
// no instance ever held more than its limit.
func TestBatchedMutationsApplyExactlyOnce(t *testing.T) {
	// A long batch delay makes sure the workers' mutations share commits.
	s, err := store.Open("", store.Options{MaxBatchDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := store.State{
		InstanceTypes: []cloud.InstanceType{{Name: "t", MaxAttachments: 3}},
		Instances: []store.SeedInstance{
			{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "a", Zone: "z", InstanceType: "t"}},
			{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "b", Zone: "z", InstanceType: "t"}},
		},
		// 5 < 2×3: both the instance limit and the account quota refuse attaches.
		Quotas: store.Limits{Attachments: 5, Volumes: 10, CapacityBytes: 100},
	}
	if _, err := s.SeedIfEmpty(st); err != nil {
		t.Fatal(err)
	}
	var vols []string
	for i := range 8 {
		v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprint("v", i), SizeBytes: 1, Zone: "z"})
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, v.ID)
	}
	startRev, err := s.Revision()
	if err != nil {
		t.Fatal(err)
	}
	startTx, err := store.LastTxID(s)
	if err != nil {
		t.Fatal(err)
	}

	const workers, opsEach = 24, 40
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		acks   []ack
		muts   int
		errs   []error
		starts = make(chan struct{})
	)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			<-starts
			for range opsEach {
				vol := vols[rng.IntN(len(vols))]
				inst := []string{"a", "b"}[rng.IntN(2)]
				var (
					a   ack
					err error
					ok  []cloud.Code
				)
				switch op := rng.IntN(10); {
				case op < 5:
					var att *cloud.Attachment
					att, err = s.Attach(vol, inst, nil, nil)
					if err == nil {
						a = ack{attach: true, volumeID: att.VolumeID, instance: att.InstanceID, rev: att.Revision}
					}
					ok = []cloud.Code{cloud.CodeVolumeInUse, cloud.CodeAttachmentLimitExceeded, cloud.CodeAttachmentQuotaExceeded}
				case op < 8:
					var det *cloud.Attachment
					if det, err = s.Detach(vol, inst, nil); err == nil {
						a.rev = det.Revision
					}
					a.volumeID, a.instance = vol, inst
				case op < 9:
					// Registers the instance, then finds no volume: fails after writing.
					reg := &cloud.CreateInstanceRequest{ID: fmt.Sprint("ghost-", w), Zone: "z", InstanceType: "t"}
					_, err = s.Attach("vol-ffffffff", reg.ID, reg, nil)
					if err == nil {
						err = errors.New("attach of a missing volume succeeded")
					}
					ok = []cloud.Code{cloud.CodeVolumeNotFound}
				default:
					// Fails before writing anything.
					_, err = s.Attach(vol, "nowhere", nil, nil)
					if err == nil {
						err = errors.New("attach to a missing instance succeeded")
					}
					ok = []cloud.Code{cloud.CodeInstanceNotFound}
				}
				mu.Lock()
				muts++
				switch {
				case err == nil:
					acks = append(acks, a)
				case !slices.Contains(ok, cloud.CodeOf(err)):
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	close(starts)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errors.Join(errs...))
	}

	endTx, err := store.LastTxID(s)
	if err != nil {
		t.Fatal(err)
	}
	if commits := endTx - startTx; commits >= muts {
		t.Errorf("%d mutations took %d commits: none were batched", muts, commits)
	}

	events, _, err := s.Events(startRev)
	if err != nil {
		t.Fatal(err)
	}
	// Replay the log: it must be a valid history on its own.
	attachedTo := map[string]string{}
	perInstance := map[string]int{}
	attachEvents := map[ack]int{}
	detachRevs := map[uint64]bool{}
	lastRev := startRev
	for i, ev := range events {
		if i > 0 && ev.Seq != events[i-1].Seq+1 {
			t.Errorf("event seq jumps from %d to %d", events[i-1].Seq, ev.Seq)
		}
		if ev.Revision <= lastRev {
			t.Errorf("event %+v: revision not above %d", ev, lastRev)
		}
		lastRev = ev.Revision
		switch ev.Type {
		case "VolumeAttached":
			if attachedTo[ev.VolumeID] != "" {
				t.Errorf("event %+v: volume already attached to %s", ev, attachedTo[ev.VolumeID])
			}
			attachedTo[ev.VolumeID] = ev.InstanceID
			perInstance[ev.InstanceID]++
			if *ev.Attached != perInstance[ev.InstanceID] || *ev.Attached > *ev.Limit {
				t.Errorf("event %+v: attached %d by the log, limit %d", ev, perInstance[ev.InstanceID], *ev.Limit)
			}
			attachEvents[ack{attach: true, volumeID: ev.VolumeID, instance: ev.InstanceID, rev: ev.Revision}]++
		case "VolumeDetached":
			if attachedTo[ev.VolumeID] != ev.InstanceID {
				t.Errorf("event %+v: volume was attached to %q", ev, attachedTo[ev.VolumeID])
			}
			delete(attachedTo, ev.VolumeID)
			perInstance[ev.InstanceID]--
			detachRevs[ev.Revision] = true
		default:
			t.Errorf("unexpected event %+v (a failed mutation left a trace?)", ev)
		}
	}
	// Every acknowledged attach is exactly one event (an idempotent repeat returns the
	// revision of the attach it repeats); every acknowledged detach that changed something
	// returned the revision of its event.
	acked := map[ack]bool{}
	for _, a := range acks {
		if a.attach {
			acked[a] = true
			if n := attachEvents[a]; n != 1 {
				t.Errorf("acknowledged attach %+v has %d events, want 1", a, n)
			}
		}
	}
	for a := range attachEvents {
		if !acked[a] {
			t.Errorf("attach event %+v that no caller was told about", a)
		}
	}
	for _, a := range acks {
		if !a.attach && a.rev > startRev {
			delete(detachRevs, a.rev)
		}
	}
	if len(detachRevs) > 0 {
		t.Errorf("detach events at revisions %v that no caller was told about", detachRevs)
	}

	// The stored state is the replayed one.
	total := 0
	for _, id := range vols {
		v, err := s.GetVolume(id)
		if err != nil {
			t.Fatal(err)
		}
		if v.AttachedTo != attachedTo[id] {
			t.Errorf("volume %s attached to %q, log says %q", id, v.AttachedTo, attachedTo[id])
		}
	}
	for _, id := range []string{"a", "b"} {
		inst, err := s.GetInstance(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(inst.Attachments) != perInstance[id] {
			t.Errorf("instance %s holds %v, log says %d", id, inst.Attachments, perInstance[id])
		}
		for _, v := range inst.Attachments {
			if attachedTo[v] != id {
				t.Errorf("instance %s lists %s, log says it is on %q", id, v, attachedTo[v])
			}
		}
		total += len(inst.Attachments)
	}
	if q, err := s.Quotas(); err != nil || q.Attachments.Used != int64(total) {
		t.Errorf("quota use %+v, %v; want %d", q, err, total)
	}
	if list, err := s.ListInstances(); err != nil || len(list) != 2 {
		t.Errorf("instances %+v, %v: a failed auto-registration was kept", list, err)
	}
}
