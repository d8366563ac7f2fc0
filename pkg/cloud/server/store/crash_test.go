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
// moment update returned it.
func crashChild(dir string) {
	s, err := store.Open(dir, store.Options{})
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
	for i, vol := range vols {
		go func() {
			inst := []string{"a", "b"}[i%2]
			for {
				att, err := s.Attach(vol, inst, nil, nil)
				if err != nil {
					say("error %v", err)
					return
				}
				say("A %s %s %d", vol, inst, att.Revision)
				det, err := s.Detach(vol, inst, nil)
				if err != nil {
					say("error %v", err)
					return
				}
				say("D %s %s %d", vol, inst, det.Revision)
			}
		}()
	}
	select {}
}

// TestKilledStoreKeepsAcknowledged kills (SIGKILL) a process in the middle of concurrent
// attaches and detaches, reopens its store and checks that every mutation the process
// acknowledged is there, exactly once, and that the state is the one the event log replays
// to: commits are atomic and nothing is acknowledged before its commit. (The kernel keeps
// the page cache across a process kill, so this checks the store's ordering, not the disk's
// fsync; bbolt's fdatasync before each acknowledgement covers power loss.)
func TestKilledStoreKeepsAcknowledged(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledStoreKeepsAcknowledged$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type ack struct {
		attach    bool
		vol, inst string
		rev       uint64
	}
	var (
		acks     []ack
		startRev uint64
		lines    = bufio.NewScanner(out)
		deadline = time.Now().Add(30 * time.Second)
	)
	// Kill it once it has acknowledged a good number of mutations, in the middle of more.
	for len(acks) < 600 && time.Now().Before(deadline) && lines.Scan() {
		line := lines.Text()
		var a ack
		var kind string
		switch {
		case strings.HasPrefix(line, "ready "):
			_, err = fmt.Sscanf(line, "ready %d", &startRev)
		case strings.HasPrefix(line, "A "), strings.HasPrefix(line, "D "):
			_, err = fmt.Sscanf(line, "%s %s %s %d", &kind, &a.vol, &a.inst, &a.rev)
			a.attach = kind == "A"
			acks = append(acks, a)
		default:
			err = fmt.Errorf("child said %q", line)
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal(err)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Acknowledgements already on their way before the kill count too.
	for lines.Scan() {
		var a ack
		var kind string
		if _, err := fmt.Sscanf(lines.Text(), "%s %s %s %d", &kind, &a.vol, &a.inst, &a.rev); err == nil && (kind == "A" || kind == "D") {
			a.attach = kind == "A"
			acks = append(acks, a)
		}
	}
	_ = cmd.Wait()
	if len(acks) < 100 {
		t.Fatalf("only %d mutations acknowledged before the kill", len(acks))
	}

	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	events, _, err := s.Events(startRev)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[ack]int{}
	attachedTo := map[string]string{}
	perInstance := map[string]int{}
	for i, ev := range events {
		if i > 0 && (ev.Seq != events[i-1].Seq+1 || ev.Revision != events[i-1].Revision+1) {
			t.Errorf("event %d follows %d: a gap in the log", ev.Seq, events[i-1].Seq)
		}
		a := ack{attach: ev.Type == "VolumeAttached", vol: ev.VolumeID, inst: ev.InstanceID, rev: ev.Revision}
		logged[a]++
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
