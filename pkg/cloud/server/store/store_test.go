package store_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

func testState() store.State {
	return store.State{
		InstanceTypes: []cloud.InstanceType{{Name: "small", MaxAttachments: 4}},
		Instances:     []store.SeedInstance{{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "n", Zone: "z", InstanceType: "small"}}},
		Quotas:        store.Limits{Attachments: 10, Volumes: 10, CapacityBytes: 100},
	}
}

func TestEventsAreBounded(t *testing.T) {
	now := time.Unix(100, 0)
	s, err := store.Open("", store.Options{MaxEvents: 5, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		v := 1
		if _, err := s.PatchInstance("n", cloud.InstancePatch{OutOfBandSlots: &v}, nil); err != nil {
			t.Fatal(err)
		}
	}
	events, rev, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 5 || events[0].Seq != 5 || events[4].Seq != 9 || rev != 9 || events[4].Revision != 9 {
		t.Fatalf("events %+v at revision %d: want seq 5..9", events, rev)
	}
	if !events[0].Time.Equal(now) {
		t.Fatalf("event time %v, want the injected clock's %v", events[0].Time, now)
	}
}

func TestTemporaryStoreIsRemoved(t *testing.T) {
	s, err := store.Open("", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("temporary store missing while open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary store %s left behind: %v", path, err)
	}
}

func TestSeedOnlyOnce(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if seeded, err := s.SeedIfEmpty(testState()); err != nil || !seeded {
		t.Fatalf("first seed: %v, %v", seeded, err)
	}
	if _, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "z"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if seeded, err := s.SeedIfEmpty(testState()); err != nil || seeded {
		t.Fatalf("second seed: %v, %v (want kept state)", seeded, err)
	}
	if list, err := s.ListVolumes(0, ""); err != nil || len(list.Volumes) != 1 {
		t.Fatalf("volumes after reopen %+v, %v", list, err)
	}
}

func TestStateValidation(t *testing.T) {
	neg := -1
	bad := store.State{
		InstanceTypes: []cloud.InstanceType{{Name: ""}, {Name: "a", MaxAttachments: -1}, {Name: "a"}},
		Instances: []store.SeedInstance{
			{CreateInstanceRequest: cloud.CreateInstanceRequest{Zone: "z", InstanceType: "a"}},
			{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "x", Zone: "z", InstanceType: "nope", OutOfBandSlots: -2}, AttachLimit: &neg},
		},
		Quotas: store.Limits{Attachments: -1, Volumes: -1, CapacityBytes: -1},
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad state accepted")
	}
	// errors.Join of every problem: one line each.
	if got := len(splitLines(err.Error())); got < 9 {
		t.Fatalf("only %d problems reported:\n%v", got, err)
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// TestCreateAnswersWhatGetReads: the volume CreateVolume returns, new or found again by
// name, is the one GetVolume reads afterwards: detached since its creation, not an
// empty state.
func TestCreateAnswersWhatGetReads(t *testing.T) {
	s, err := store.Open("", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	req := cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "z"}
	for _, attempt := range []string{"create", "create again"} {
		created, err := s.CreateVolume(req)
		if err != nil {
			t.Fatalf("%s: %v", attempt, err)
		}
		got, err := s.GetVolume(created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if created.State != cloud.StateDetached || created.StateSince == nil || !created.StateSince.Equal(created.CreatedAt) {
			t.Errorf("%s: state %q since %v, want detached since its creation %v", attempt, created.State, created.StateSince, created.CreatedAt)
		}
		if created.State != got.State || created.StateSince == nil || got.StateSince == nil || !created.StateSince.Equal(*got.StateSince) ||
			created.Revision != got.Revision || created.AttachedTo != got.AttachedTo {
			t.Errorf("%s answered %+v, GetVolume reads %+v", attempt, created, got)
		}
	}
}
