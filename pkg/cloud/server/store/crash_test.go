package store_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// crashDirEnv makes the test binary run crashChild instead of the test: the process that the
// test kills.
const crashDirEnv = "FAKECLOUD_STORE_CRASH_DIR"

const crashVolumes = 16

// crashChild seeds a store in dir, then attaches and detaches from many goroutines until it is
// killed, printing every acknowledged mutation ("A vol inst rev" / "D vol inst rev") the
// moment update returned it. With opts' durations set (asynchronous transitions), a worker
// completes transitions meanwhile, and what is printed is the start of each transition.
func crashChild(dir string, opts store.Options) {
	async := opts.AttachDuration > 0 || opts.DetachDuration > 0
	s, err := store.Open(dir, opts)
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
		fmt.Printf(format+"\n", args...) // unbuffered: one write per line
	}
	say("ready %d", rev)
	if async {
		go func() {
			for {
				if _, _, err := s.CompleteDue(nil); err != nil {
					say("error %v", err)
					return
				}
			}
		}()
	}
	for i, vol := range vols {
		go func() {
			inst := []string{"a", "b"}[i%2]
			for {
				att, err := s.Attach(vol, inst, nil, nil)
				if async && cloud.CodeOf(err) == cloud.CodeIncorrectState {
					continue // still detaching
				}
				if err != nil {
					say("error %v", err)
					return
				}
				if !async || att.State == cloud.StateAttaching {
					say("A %s %s %d", vol, inst, att.Revision)
				}
				det, err := s.Detach(vol, inst, nil)
				if err != nil {
					say("error %v", err)
					return
				}
				if !async || det.State == cloud.StateDetaching {
					say("D %s %s %d", vol, inst, det.Revision)
				}
			}
		}()
	}
	select {}
}

// crashAck is a mutation a crash child acknowledged, keyed as its event in the log: the
// event type, the volume, the instance and the revision.
type crashAck struct {
	typ       string
	vol, inst string
	rev       uint64
}

// killCrashChild runs the test named test again in a child process with env set to dir (the
// child runs crashChild), reads its acknowledgements ("A" and "D" lines become crashAcks of
// the event types kinds names), kills it (SIGKILL) once it has acknowledged a good number of
// mutations, in the middle of more, and returns them with the revision the child started
// from. It fails the test when the child says anything else or acknowledged too few.
func killCrashChild(t *testing.T, test, env, dir string, kinds map[string]string) ([]crashAck, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		acks     []crashAck
		startRev uint64
		lines    = bufio.NewScanner(out)
		deadline = time.Now().Add(30 * time.Second)
	)
	parse := func(line string) (crashAck, bool) {
		var a crashAck
		var kind string
		if _, err := fmt.Sscanf(line, "%s %s %s %d", &kind, &a.vol, &a.inst, &a.rev); err != nil || kinds[kind] == "" {
			return a, false
		}
		a.typ = kinds[kind]
		return a, true
	}
	for len(acks) < 600 && time.Now().Before(deadline) && lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "ready ") {
			if _, err := fmt.Sscanf(line, "ready %d", &startRev); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
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
	// Acknowledgements already on their way before the kill count too.
	for lines.Scan() {
		if a, ok := parse(lines.Text()); ok {
			acks = append(acks, a)
		}
	}
	_ = cmd.Wait()
	if len(acks) < 100 {
		t.Fatalf("only %d mutations acknowledged before the kill", len(acks))
	}
	return acks, startRev
}

// TestKilledStoreKeepsAcknowledged kills (SIGKILL) a process in the middle of concurrent
// attaches and detaches, reopens its store and checks that every mutation the process
// acknowledged is there, exactly once, and that the state is the one the event log replays
// to: commits are atomic and nothing is acknowledged before its commit. (The kernel keeps
// the page cache across a process kill, so this checks the store's ordering, not the disk's
// fsync; bbolt's fdatasync before each acknowledgement covers power loss.)
func TestKilledStoreKeepsAcknowledged(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir, store.Options{})
		return
	}
	dir := t.TempDir()
	acks, startRev := killCrashChild(t, "TestKilledStoreKeepsAcknowledged", crashDirEnv, dir,
		map[string]string{"A": "VolumeAttached", "D": "VolumeDetached"})

	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	events, _, err := s.Events(startRev)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[crashAck]int{}
	attachedTo := map[string]string{}
	perInstance := map[string]int{}
	for i, ev := range events {
		if i > 0 && (ev.Seq != events[i-1].Seq+1 || ev.Revision != events[i-1].Revision+1) {
			t.Errorf("event %d follows %d: a gap in the log", ev.Seq, events[i-1].Seq)
		}
		logged[crashAck{typ: ev.Type, vol: ev.VolumeID, inst: ev.InstanceID, rev: ev.Revision}]++
		switch ev.Type {
		case "VolumeAttached":
			if attachedTo[ev.VolumeID] != "" {
				t.Errorf("event %+v: volume already attached", ev)
			}
			attachedTo[ev.VolumeID] = ev.InstanceID
			perInstance[ev.InstanceID]++
		case "VolumeDetached":
			delete(attachedTo, ev.VolumeID)
			perInstance[ev.InstanceID]--
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	for _, a := range acks {
		if logged[a] != 1 {
			t.Errorf("acknowledged %+v is %d times in the log after the kill, want once", a, logged[a])
		}
	}
	total := 0
	for id, n := range perInstance {
		inst, err := s.GetInstance(id)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for v, on := range attachedTo {
			if on == id {
				want = append(want, v)
			}
		}
		slices.Sort(want)
		if len(inst.Attachments) != n || !slices.Equal(inst.Attachments, want) {
			t.Errorf("instance %s lists %v, the log replays to %v", id, inst.Attachments, want)
		}
		total += n
	}
	for i := range crashVolumes {
		id := fmt.Sprintf("vol-%08x", i+1)
		if v, err := s.GetVolume(id); err != nil || v.AttachedTo != attachedTo[id] {
			t.Errorf("volume %s: %+v, %v; the log says attached to %q", id, v, err, attachedTo[id])
		}
	}
	if q, err := s.Quotas(); err != nil || q.Attachments.Used != int64(total) {
		t.Errorf("quota use %+v, %v; the log says %d", q, err, total)
	}
	t.Logf("%d acknowledged mutations before the kill, %d in the log", len(acks), len(events))
}
