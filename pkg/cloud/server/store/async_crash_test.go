package store_test

import (
	"os"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// asyncCrashDirEnv makes the test binary run crashChild with asynchronous transitions
// instead of TestKilledStoreKeepsTransitions: the process that the test kills.
const asyncCrashDirEnv = "FAKECLOUD_STORE_ASYNC_CRASH_DIR"

// TestKilledStoreKeepsTransitions kills (SIGKILL) a process in the middle of concurrent
// asynchronous attaches and detaches and of their completions, reopens its store, completes
// what was under way, and checks that every acknowledged start is in the log exactly once,
// that the log is a valid run of the state machine for every volume (no transition completed
// twice or skipped), and that the slots held and the quota use are what the log replays to.
func TestKilledStoreKeepsTransitions(t *testing.T) {
	if dir := os.Getenv(asyncCrashDirEnv); dir != "" {
		// Asynchronous transitions of 1 ms: the child's worker completes them meanwhile.
		crashChild(dir, store.Options{AttachDuration: time.Millisecond, DetachDuration: time.Millisecond})
		return
	}
	dir := t.TempDir()
	acks, startRev := killCrashChild(t, "TestKilledStoreKeepsTransitions", asyncCrashDirEnv, dir,
		map[string]string{"A": "VolumeAttaching", "D": "VolumeDetaching"})

	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	// What was under way completes after the restart (its due time has passed).
	if _, _, err := s.CompleteDue(nil); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after completing: %v, %v", p, err)
	}
	events, _, err := s.Events(startRev)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[crashAck]int{}
	state := map[string]cloud.AttachState{}
	held := map[string]int{}
	next := map[string]map[cloud.AttachState]cloud.AttachState{
		"VolumeAttaching": {"": cloud.StateAttaching, cloud.StateDetached: cloud.StateAttaching},
		"VolumeAttached":  {cloud.StateAttaching: cloud.StateAttached},
		"VolumeDetaching": {cloud.StateAttaching: cloud.StateDetaching, cloud.StateAttached: cloud.StateDetaching},
		"VolumeDetached":  {cloud.StateDetaching: cloud.StateDetached},
	}
	for i, ev := range events {
		if i > 0 && (ev.Seq != events[i-1].Seq+1 || ev.Revision < events[i-1].Revision) {
			t.Errorf("event %d (revision %d) follows %d (revision %d): a gap in the log", ev.Seq, ev.Revision, events[i-1].Seq, events[i-1].Revision)
		}
		logged[crashAck{typ: ev.Type, vol: ev.VolumeID, inst: ev.InstanceID, rev: ev.Revision}]++
		to, ok := next[ev.Type][state[ev.VolumeID]]
		if !ok {
			t.Errorf("event %+v: not a transition from %q", ev, state[ev.VolumeID])
			continue
		}
		switch ev.Type {
		case "VolumeAttaching":
			held[ev.InstanceID]++
		case "VolumeDetached":
			held[ev.InstanceID]--
		}
		if ev.Attached == nil || *ev.Attached != held[ev.InstanceID] {
			t.Errorf("event %+v: attached %v, the log replays to %d", ev, ev.Attached, held[ev.InstanceID])
		}
		state[ev.VolumeID] = to
	}
	for _, a := range acks {
		if logged[a] != 1 {
			t.Errorf("acknowledged %+v is %d times in the log after the kill, want once", a, logged[a])
		}
	}
	total := 0
	for id, n := range held {
		c, err := s.Capacity(id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Attached != n || c.Attaching+c.Detaching != 0 {
			t.Errorf("instance %s: capacity %+v, the log replays to %d held and none in transition", id, c, n)
		}
		total += n
	}
	for vol, st := range state {
		if v, err := s.GetVolume(vol); err != nil || v.State != st {
			t.Errorf("volume %s: %+v, %v; the log says %s", vol, v, err, st)
		}
	}
	if q, err := s.Quotas(); err != nil || q.Attachments.Used != int64(total) {
		t.Errorf("quota use %+v, %v; the log says %d", q, err, total)
	}
	t.Logf("%d acknowledged transitions before the kill, %d events in the log", len(acks), len(events))
}
