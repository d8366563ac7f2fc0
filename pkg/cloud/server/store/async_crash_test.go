package store_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// asyncCrashDirEnv makes the test binary run asyncCrashChild: the process the test kills.
const asyncCrashDirEnv = "FAKECLOUD_STORE_ASYNC_CRASH_DIR"

// asyncCrashChild is crashChild with asynchronous transitions (1 ms): goroutines start
// attaches and detaches ("A vol inst rev" / "D vol inst rev" the moment each is acknowledged)
// while a worker completes them, until the process is killed.
func asyncCrashChild(dir string) {
	s, err := store.Open(dir, store.Options{AttachDuration: time.Millisecond, DetachDuration: time.Millisecond})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	st := store.State{
		InstanceTypes: []cloud.InstanceType{{Name: "t", MaxAttachments: 64}},
		Quotas:        store.Limits{Attachments: 1000, Volumes: 1000, CapacityBytes: 1 << 40},
	}
	for _, id := range []string{"a", "b"} {
		st.Instances = append(st.Instances, store.SeedInstance{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: id, Zone: "z", InstanceType: "t"}})
	}
	if _, err := s.SeedIfEmpty(st); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var vols []string
	for i := range crashVolumes {
		v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprint("v", i), SizeBytes: 1, Zone: "z"})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		vols = append(vols, v.ID)
	}
	rev, _ := s.Revision()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	say("ready %d", rev)
	go func() {
		for {
			if _, _, err := s.CompleteDue(nil); err != nil {
				say("error %v", err)
				return
			}
		}
	}()
	for i, vol := range vols {
		go func() {
			inst := []string{"a", "b"}[i%2]
			for {
				att, err := s.Attach(vol, inst, nil, nil)
				if cloud.CodeOf(err) == cloud.CodeIncorrectState {
					continue // still detaching
				}
				if err != nil {
					say("error %v", err)
					return
				}
				if att.State == cloud.StateAttaching {
					say("A %s %s %d", vol, inst, att.Revision)
				}
				det, err := s.Detach(vol, inst, nil)
				if err != nil {
					say("error %v", err)
					return
				}
				if det.State == cloud.StateDetaching {
					say("D %s %s %d", vol, inst, det.Revision)
				}
			}
		}()
	}
	select {}
}

// TestKilledStoreKeepsTransitions kills (SIGKILL) a process in the middle of concurrent
// asynchronous attaches and detaches and of their completions, reopens its store, completes
// what was under way, and checks that every acknowledged start is in the log exactly once,
// that the log is a valid run of the state machine for every volume (no transition completed
// twice or skipped), and that the slots held and the quota use are what the log replays to.
func TestKilledStoreKeepsTransitions(t *testing.T) {
	if dir := os.Getenv(asyncCrashDirEnv); dir != "" {
		asyncCrashChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledStoreKeepsTransitions$")
	cmd.Env = append(os.Environ(), asyncCrashDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type ack struct {
		typ       string
		vol, inst string
		rev       uint64
	}
	var (
		acks     []ack
		startRev uint64
		lines    = bufio.NewScanner(out)
		deadline = time.Now().Add(30 * time.Second)
	)
	parse := func(line string) (ack, bool) {
		var a ack
		var kind string
		if _, err := fmt.Sscanf(line, "%s %s %s %d", &kind, &a.vol, &a.inst, &a.rev); err != nil || (kind != "A" && kind != "D") {
			return a, false
		}
		a.typ = map[string]string{"A": "VolumeAttaching", "D": "VolumeDetaching"}[kind]
		return a, true
	}
	for len(acks) < 600 && time.Now().Before(deadline) && lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "ready ") {
			if _, err := fmt.Sscanf(line, "ready %d", &startRev); err != nil {
				t.Fatal(err)
			}
			continue
		}
		a, ok := parse(line)
		if !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q", line)
		}
		acks = append(acks, a)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		if a, ok := parse(lines.Text()); ok {
			acks = append(acks, a)
		}
	}
	_ = cmd.Wait()
	if len(acks) < 100 {
		t.Fatalf("only %d transitions acknowledged before the kill", len(acks))
	}

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
	logged := map[ack]int{}
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
		logged[ack{typ: ev.Type, vol: ev.VolumeID, inst: ev.InstanceID, rev: ev.Revision}]++
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
